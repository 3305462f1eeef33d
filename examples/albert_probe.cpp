// albert_probe: asks a pretrained ACT-ALBERT which tasks and which words use more depth —
// the first study's section 3 (../shared/papers.md §A.3). Two ways:
//   probe     frozen model, a linear probe (or --mlp) on the [CLS] state and on the mean of
//             the token states after iteration n = 1..N_max (halting as in pretraining,
//             stopped at n): what each iteration adds, task by task;
//   finetune  the model plus a classification head, fine-tuned per task with the ponder term
//             (--tau, a list: the paper keeps 5e-4, the official code's runs used 0) and a
//             fixed-depth baseline (every token N_max iterations): accuracy, mean iterations
//             per task, per word class and per role (main verb, subject head).
// Tasks come from the tagged Brown corpus (data/probing.hpp states the heuristics).
//
//   build/examples/albert_act --preset tiny --steps 4000 --out runs/act
//   build/examples/albert_probe --checkpoint runs/act/checkpoint.safetensors --tasks all --mode both --out runs/probe
//
// Writes to --out (atomically): probing.csv (task, representation, iteration, accuracy,
// accuracy_std, seeds), finetune.csv (task, policy, tau, accuracy, mean_iterations,
// accuracy_std, seeds), iterations_by_word.csv (task, word_class, tokens, mean_iterations) and
// report.html. With --seeds N every probe and fine-tuning run is repeated with N seeds (the
// probe's or head's initialisation and the example order; the first is --seed's run): accuracy
// and mean_iterations are their means, accuracy_std the sample standard deviation (0 for one).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <depthlab/depthlab.hpp>
#include <depthlab/data/probing.hpp>
#include <depthlab/data/tokenizer.hpp>

#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/vocabulary.hpp"

using namespace depthlab;

namespace {

struct options {
    std::string checkpoint = "runs/act/checkpoint.safetensors", data = ".data/english", mode = "both", out = "runs/probe";
    std::vector<std::string> tasks = {"all"};
    std::vector<double> tau = {5e-4};
    std::string policy = "act", device = "cpu", precision = "auto";
    std::int64_t epochs = 3, probe_epochs = 20, batch = 32, max_train = 4000, max_eval = 1000, seeds = 1;
    double lr = 1e-4, probe_lr = 3e-3;
    std::uint64_t seed = 1;
    bool mlp = false;
};

// Where a piece's iterations are counted: its word's class (first pieces), or one of these.
constexpr int continuation_row = data::word_class_count, cls_row = continuation_row + 1, sep_row = cls_row + 1, row_count = sep_row + 1;
constexpr std::uint8_t role_main_verb = 1, role_subject = 2;

const char* row_name(int r) {
    if (r < data::word_class_count) return data::to_string(static_cast<data::word_class>(r));
    return r == continuation_row ? "continuation_piece" : r == cls_row ? "[CLS]" : "[SEP]";
}

/// One example as the model reads it: [CLS] pieces [SEP], and per position the row of
/// iterations_by_word and the roles of its word (first pieces only).
struct sequence {
    std::vector<std::int64_t> ids;
    std::vector<std::uint8_t> row, role;
    std::int64_t label = 0;
};

struct task_data {
    std::string name;
    std::vector<std::string> classes;
    std::vector<sequence> train, dev, test;
};

std::vector<sequence> encode(const std::vector<data::probe_example>& xs, const data::tokenizer& tok, index_t max_len, std::int64_t vocab) {
    const data::special_ids sp;
    std::vector<sequence> out;
    for (const auto& x : xs) {
        data::tagged_sentence s;
        for (std::size_t i = 0; i < x.words.size(); ++i) s.push_back({x.words[i], x.tags[i]});
        const auto c = data::analyse_clause(s);
        const auto a = data::align_pieces(x.words, x.tags, [&](const std::string& t) {
            const auto ids = tok.encode(t);
            return std::pair{tok.encode_pieces(t), std::vector<std::int64_t>(ids.begin(), ids.end())};
        });
        sequence q;
        q.label = x.label;
        q.ids.push_back(sp.cls);
        q.row.push_back(cls_row);
        q.role.push_back(0);
        for (std::size_t p = 0; p < a.ids.size() && static_cast<index_t>(q.ids.size()) + 1 < max_len; ++p) {
            DEPTHLAB_CHECK(a.ids[p] >= 0 && a.ids[p] < vocab, index_error, "albert_probe: piece id ", a.ids[p], " outside the model's vocabulary of ",
                           vocab, " (tokenizer and checkpoint disagree)");
            const int w = a.piece_word[p];
            q.ids.push_back(a.ids[p]);
            q.row.push_back(a.first_piece[p] ? static_cast<std::uint8_t>(data::coarse_class(x.tags[static_cast<std::size_t>(w)])) : continuation_row);
            q.role.push_back(a.first_piece[p] ? static_cast<std::uint8_t>((w == c.main_verb ? role_main_verb : 0) | (w == c.subject_head ? role_subject : 0)) : 0);
        }
        q.ids.push_back(sp.sep);
        q.row.push_back(sep_row);
        q.role.push_back(0);
        out.push_back(std::move(q));
    }
    return out;
}

nn::token_batch make_batch(const std::vector<sequence>& xs, std::size_t first, std::size_t count) {
    nn::token_batch b;
    b.batch = static_cast<index_t>(count);
    for (std::size_t i = 0; i < count; ++i) b.length = std::max<index_t>(b.length, static_cast<index_t>(xs[first + i].ids.size()));
    b.ids.assign(static_cast<std::size_t>(b.batch * b.length), 0);
    b.segments.assign(b.ids.size(), 0);
    for (std::size_t i = 0; i < count; ++i) {
        const auto& q = xs[first + i];
        std::copy(q.ids.begin(), q.ids.end(), b.ids.begin() + static_cast<std::ptrdiff_t>(i * static_cast<std::size_t>(b.length)));
        b.lengths.push_back(static_cast<index_t>(q.ids.size()));
    }
    return b;
}

std::vector<std::int64_t> labels_of(const std::vector<sequence>& xs, std::size_t first, std::size_t count) {
    std::vector<std::int64_t> l;
    for (std::size_t i = 0; i < count; ++i) l.push_back(xs[first + i].label);
    return l;
}

/// Iterations per row of iterations_by_word, and per role.
struct depth_tally {
    std::array<double, row_count> sum{};
    std::array<std::int64_t, row_count> count{};
    double verb_sum = 0, subject_sum = 0, all_sum = 0;
    std::int64_t verbs = 0, subjects = 0, all = 0;
    void add(const std::vector<sequence>& xs, std::size_t first, const halting::halting_record& r) {
        for (index_t b = 0; b < r.batch; ++b) {
            const auto& q = xs[first + static_cast<std::size_t>(b)];
            for (std::size_t t = 0; t < q.ids.size(); ++t) {
                const double n = r.N[static_cast<std::size_t>(b * r.length) + t];
                sum[q.row[t]] += n, ++count[q.row[t]];
                all_sum += n, ++all;
                if (q.role[t] & role_main_verb) verb_sum += n, ++verbs;
                if (q.role[t] & role_subject) subject_sum += n, ++subjects;
            }
        }
    }
    [[nodiscard]] double mean() const { return all ? all_sum / static_cast<double>(all) : NAN; }
    depth_tally& operator+=(const depth_tally& o) {
        for (int r = 0; r < row_count; ++r) sum[r] += o.sum[r], count[r] += o.count[r];
        verb_sum += o.verb_sum, verbs += o.verbs, subject_sum += o.subject_sum, subjects += o.subjects, all_sum += o.all_sum, all += o.all;
        return *this;
    }
};

/// The classifier fine-tuned per task: the pretrained model, its pooler, a new head.
template <class Policy, class B>
class act_classifier : public nn::Module<float, B> {
public:
    act_classifier(const nn::albert_config& cfg, const halting::act_options& aopt, index_t classes, std::uint64_t seed) : gen_(seed + 17) {
        albert = &this->register_module("albert", std::make_unique<halting::ActAlbert<float, B, Policy>>(cfg, aopt, seed));
        head = &this->register_module("head", std::make_unique<nn::Linear<float, B>>(cfg.layer.dim, classes, gen_, cfg.layer.init));
    }
    Var<float, B> logits(const Var<float, B>& hidden) const { return nn::albert_sop_logits(hidden, *albert->pooler, *head); }
    halting::ActAlbert<float, B, Policy>* albert;
    nn::Linear<float, B>* head;

private:
    Generator gen_;
};

/// A linear probe (or one hidden layer of 256 with GELU) on fixed features.
template <class B>
class probe_head : public nn::Module<float, B> {
public:
    probe_head(index_t in, index_t classes, bool mlp, std::uint64_t seed) : gen_(seed) {
        if (mlp) hidden = &this->register_module("hidden", std::make_unique<nn::Linear<float, B>>(in, 256, gen_));
        out = &this->register_module("out", std::make_unique<nn::Linear<float, B>>(mlp ? 256 : in, classes, gen_));
    }
    Var<float, B> operator()(const Var<float, B>& x) const { return (*out)(hidden ? gelu((*hidden)(x)) : x); }
    nn::Linear<float, B>* hidden = nullptr;
    nn::Linear<float, B>* out = nullptr;

private:
    Generator gen_;
};

struct probe_row {
    std::string task, representation;
    int iteration;
    double accuracy, accuracy_std;  // over the seeds
};
struct finetune_row {
    std::string task, policy;
    double tau, accuracy, mean_iterations, main_verb, subject_head;
    double accuracy_std = 0;  // over the seeds
};

/// Mean and sample standard deviation (0 for one value).
std::pair<double, double> mean_std(const std::vector<double>& v) {
    double m = 0, ss = 0;
    for (double x : v) m += x / static_cast<double>(v.size());
    for (double x : v) ss += (x - m) * (x - m);
    return {m, v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0.0};
}
/// The seed of repeat r (r = 0: the run of --seed itself).
std::uint64_t repeat_seed(std::uint64_t seed, std::int64_t r) { return seed + 1000 * static_cast<std::uint64_t>(r); }

template <class B>
struct job {
    const options& o;
    nn::albert_config cfg;
    halting::act_options aopt;
    std::vector<task_data> tasks;

    /// [CLS] and mean-of-tokens features (N, H) of a split, after the encoder's current
    /// max_iterations (probe() standardises them).
    template <class Policy>
    std::pair<std::vector<float>, std::vector<float>> features(halting::ActAlbert<float, B, Policy>& model, const std::vector<sequence>& xs) {
        const index_t H = cfg.layer.dim;
        std::vector<float> cls(xs.size() * static_cast<std::size_t>(H)), mean(cls.size());
        no_grad ng;
        for (std::size_t first = 0; first < xs.size(); first += 64) {
            const std::size_t count = std::min<std::size_t>(64, xs.size() - first);
            const auto b = make_batch(xs, first, count);
            const auto h = model.encode(b).hidden.value().to_vector();
            for (std::size_t i = 0; i < count; ++i)
                for (index_t t = 0; t < b.lengths[i]; ++t)
                    for (index_t k = 0; k < H; ++k) {
                        const float v = h[(i * static_cast<std::size_t>(b.length) + static_cast<std::size_t>(t)) * static_cast<std::size_t>(H) + static_cast<std::size_t>(k)];
                        if (t == 0) cls[(first + i) * static_cast<std::size_t>(H) + static_cast<std::size_t>(k)] = v;
                        mean[(first + i) * static_cast<std::size_t>(H) + static_cast<std::size_t>(k)] += v / static_cast<float>(b.lengths[i]);
                    }
        }
        return {cls, mean};
    }

    /// Trains a probe on train features, keeps the epoch with the best dev accuracy and
    /// returns its test accuracy (%). The features are standardised with the train statistics.
    double probe(std::array<std::vector<float>, 3> f, const task_data& t, std::uint64_t seed) {
        const index_t H = cfg.layer.dim;
        const std::size_t h = static_cast<std::size_t>(H);
        std::vector<double> mu(h), sd(h);
        const std::size_t n_train = t.train.size();
        for (std::size_t i = 0; i < n_train; ++i)
            for (std::size_t k = 0; k < h; ++k) mu[k] += f[0][i * h + k] / static_cast<double>(n_train);
        for (std::size_t i = 0; i < n_train; ++i)
            for (std::size_t k = 0; k < h; ++k) sd[k] += std::pow(f[0][i * h + k] - mu[k], 2) / static_cast<double>(n_train);
        for (auto& v : sd) v = std::sqrt(v) + 1e-6;
        for (auto& split : f)
            for (std::size_t i = 0; i < split.size(); ++i) split[i] = static_cast<float>((split[i] - mu[i % h]) / sd[i % h]);
        probe_head<B> head(H, static_cast<index_t>(t.classes.size()), o.mlp, seed);
        optim::AdamW<float, B> opt(head.named_parameters(), optim::AdamWOptions{.lr = o.probe_lr, .weight_decay = 0.01});
        const std::array<const std::vector<sequence>*, 3> seqs = {&t.train, &t.dev, &t.test};
        auto accuracy = [&](int s) {
            no_grad ng;
            const auto n = static_cast<index_t>(seqs[static_cast<std::size_t>(s)]->size());
            if (n == 0) return std::nan("");
            const auto x = Var<float, B>::constant(Tensor<float, B>::from({n, H}, f[static_cast<std::size_t>(s)]));
            return nn::accuracy(head(x).value(), labels_of(*seqs[static_cast<std::size_t>(s)], 0, static_cast<std::size_t>(n))).percent();
        };
        Generator g(seed);
        std::vector<std::size_t> order(n_train);
        for (std::size_t i = 0; i < n_train; ++i) order[i] = i;
        double best_dev = -1, test_at_best = NAN;
        constexpr std::size_t mb = 128;
        for (std::int64_t epoch = 0; epoch < o.probe_epochs; ++epoch) {
            for (std::size_t i = n_train; i > 1; --i) std::swap(order[i - 1], order[static_cast<std::size_t>(g.below(i))]);
            for (std::size_t first = 0; first < n_train; first += mb) {
                const std::size_t count = std::min(mb, n_train - first);
                std::vector<float> x(count * h);
                std::vector<std::int64_t> y(count);
                for (std::size_t i = 0; i < count; ++i) {
                    std::copy_n(f[0].begin() + static_cast<std::ptrdiff_t>(order[first + i] * h), h, x.begin() + static_cast<std::ptrdiff_t>(i * h));
                    y[i] = t.train[order[first + i]].label;
                }
                head.zero_grad();
                cross_entropy(head(Var<float, B>::constant(Tensor<float, B>::from({static_cast<index_t>(count), H}, x))), y).backward();
                opt.step();
            }
            const double dev = accuracy(1);
            if (dev > best_dev || std::isnan(dev)) best_dev = dev, test_at_best = accuracy(2);
        }
        return test_at_best;
    }

    std::vector<probe_row> run_probing() {
        std::vector<probe_row> rows;
        halting::ActAlbert<float, B, halting::act> model(cfg, aopt, o.seed);
        io::load_parameters(o.checkpoint, model);
        model.eval();
        const int n_max = aopt.max_iterations;
        for (const auto& t : tasks) {
            if (t.train.empty() || t.test.empty()) {
                std::printf("probe %s: no examples (skipped)\n", t.name.c_str());
                continue;
            }
            for (int n = 1; n <= n_max; ++n) {
                model.encoder->opt.max_iterations = n;
                const auto tr = features(model, t.train), dv = features(model, t.dev), te = features(model, t.test);
                std::vector<double> cls_runs, mean_runs;
                for (std::int64_t r = 0; r < o.seeds; ++r) {
                    const std::uint64_t seed = repeat_seed(o.seed, r) + static_cast<std::uint64_t>(n);
                    cls_runs.push_back(probe({tr.first, dv.first, te.first}, t, seed));
                    mean_runs.push_back(probe({tr.second, dv.second, te.second}, t, seed));
                }
                const auto [cls, cls_sd] = mean_std(cls_runs);
                const auto [mean, mean_sd] = mean_std(mean_runs);
                rows.push_back({t.name, "cls", n, cls, cls_sd});
                rows.push_back({t.name, "mean", n, mean, mean_sd});
                std::printf("probe %-8s iteration %d/%d: [CLS] %.1f%%  mean of tokens %.1f%%%s  (%zu train, %zu test)\n", t.name.c_str(), n, n_max, cls,
                            mean, o.seeds > 1 ? (" (std " + report::format_fixed(cls_sd, 1) + " / " + report::format_fixed(mean_sd, 1) + " over " +
                                                 std::to_string(o.seeds) + " seeds)").c_str() : "",
                            t.train.size(), t.test.size());
                std::fflush(stdout);
            }
        }
        model.encoder->opt.max_iterations = n_max;
        return rows;
    }

    /// Fine-tunes one copy of the pretrained model on task t; returns the test row and adds
    /// the test set's iterations to tally.
    /// finetune() once per seed: the means, the accuracy's standard deviation, and the first
    /// seed's iterations added to tally.
    template <class Policy>
    finetune_row finetune_seeds(const task_data& t, double tau, const char* policy_name, depth_tally& tally) {
        std::vector<finetune_row> runs;
        for (std::int64_t r = 0; r < o.seeds; ++r) {
            depth_tally scratch;
            runs.push_back(finetune<Policy>(t, tau, policy_name, r == 0 ? tally : scratch, repeat_seed(o.seed, r)));
        }
        finetune_row row = runs.front();
        const auto mean_of = [&](double finetune_row::*field) {
            std::vector<double> v;
            for (const auto& x : runs) v.push_back(x.*field);
            return mean_std(v);
        };
        std::tie(row.accuracy, row.accuracy_std) = mean_of(&finetune_row::accuracy);
        row.mean_iterations = mean_of(&finetune_row::mean_iterations).first;
        if (o.seeds > 1)
            std::printf("finetune %s, %s, tau %g over %lld seeds: test accuracy %.1f%% (std %.1f), mean iterations %.2f\n", t.name.c_str(), policy_name, tau,
                        static_cast<long long>(o.seeds), row.accuracy, row.accuracy_std, row.mean_iterations);
        return row;
    }

    template <class Policy>
    finetune_row finetune(const task_data& t, double tau, const char* policy_name, depth_tally& tally, std::uint64_t seed) {
        act_classifier<Policy, B> m(cfg, aopt, static_cast<index_t>(t.classes.size()), seed);
        io::load_parameters(o.checkpoint, *m.albert);
        optim::AdamW<float, B> opt(m.named_parameters(), optim::AdamWOptions{.lr = o.lr, .weight_decay = 0.01});
        const auto per_epoch = static_cast<std::int64_t>((t.train.size() + static_cast<std::size_t>(o.batch) - 1) / static_cast<std::size_t>(o.batch));
        const std::int64_t steps = std::max<std::int64_t>(1, per_epoch * o.epochs);
        const optim::warmup_linear schedule(o.lr, steps / 10, steps);
        train::Trainer<float, B> trainer(m, opt, {.steps = steps, .log_every = std::max<std::int64_t>(1, steps / 4), .save_every = steps + 1});
        trainer.schedule = [&](std::int64_t done) { return schedule.lr(done); };
        Generator g(seed + 99);
        std::vector<std::size_t> order(t.train.size());
        std::size_t next = order.size();
        std::vector<sequence> picked;
        std::printf("finetune %s, %s, tau %g: %lld steps (%lld epochs of %zu examples)\n", t.name.c_str(), policy_name, tau, static_cast<long long>(steps),
                    static_cast<long long>(o.epochs), t.train.size());
        m.train();
        trainer.fit([&] {
            picked.clear();
            for (std::int64_t i = 0; i < o.batch; ++i) {
                if (next == order.size()) {
                    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
                    for (std::size_t k = order.size(); k > 1; --k) std::swap(order[k - 1], order[static_cast<std::size_t>(g.below(k))]);
                    next = 0;
                }
                picked.push_back(t.train[order[next++]]);
            }
            const auto b = make_batch(picked, 0, picked.size());
            const auto enc = m.albert->encode(b);
            const auto ce = cross_entropy(m.logits(enc.hidden), labels_of(picked, 0, picked.size()));
            std::int64_t tokens = 0;
            for (auto l : b.lengths) tokens += l;
            return train::micro_batch<float, B>{.loss = add(ce, scale(enc.ponder, static_cast<float>(tau))),
                                                .logged = {{"ce", ce}, {"ponder", enc.ponder}},
                                                .host_logged = {{"mean_N", halting::mean_iterations(enc.record)}},
                                                .tokens = tokens};
        });
        m.eval();
        nn::accuracy_count acc;
        depth_tally local;
        {
            no_grad ng;
            for (std::size_t first = 0; first < t.test.size(); first += 64) {
                const std::size_t count = std::min<std::size_t>(64, t.test.size() - first);
                const auto b = make_batch(t.test, first, count);
                const auto enc = m.albert->encode(b);
                acc += nn::accuracy(m.logits(enc.hidden).value(), labels_of(t.test, first, count));
                local.add(t.test, first, enc.record);
            }
        }
        tally += local;
        const auto mean_of = [](double s, std::int64_t n) { return n ? s / static_cast<double>(n) : NAN; };
        finetune_row row{t.name, policy_name, tau, acc.percent(), local.mean(), mean_of(local.verb_sum, local.verbs), mean_of(local.subject_sum, local.subjects), 0.0};
        std::printf("finetune %s, %s, tau %g: test accuracy %.1f%%, mean iterations %.2f (main verbs %.2f, subject heads %.2f)\n", t.name.c_str(),
                    policy_name, tau, row.accuracy, row.mean_iterations, row.main_verb, row.subject_head);
        return row;
    }
};

template <class B>
int run(const options& o) {
    try {
        // ---- the checkpoint's model (its config is in the metadata albert_act writes)
        const io::safetensors_file ck(o.checkpoint);
        job<B> j{o, io::load_config<nn::albert_config>(ck.metadata(), "config."), io::load_config<halting::act_options>(ck.metadata(), "act."), {}};
        j.aopt.compact = true;
        j.aopt.fixed_point_trace = halting::act_options::trace::never;  // the probes need states and N only
        const auto pol = ck.metadata().find("policy");
        DEPTHLAB_CHECK(pol == ck.metadata().end() || pol->second == "act" || pol->second == "fixed", usage_error, "albert_probe: '", o.checkpoint,
                       "' was pretrained with policy '", pol->second, "'; the probes and fine-tuning use the paper's act (and fixed)");
        // ---- the tasks, tokenised with the pretraining tokenizer
        const data::tokenizer tok(o.data + "/spm.model");
        examples::check_vocabulary(ck.metadata(), o.checkpoint, tok.pieces(), o.data + "/spm.model", j.cfg.vocab);
        const auto docs = data::read_brown_tagged(o.data + "/brown.tagged.txt", o.data + "/documents.tsv");
        data::probing_config pc;
        pc.seed = o.seed;
        pc.max_train = o.max_train;
        pc.max_eval = o.max_eval;
        for (auto& t : data::make_probing_tasks(docs, o.tasks, pc))
            j.tasks.push_back({t.name, t.classes, encode(t.train, tok, j.cfg.max_len, j.cfg.vocab), encode(t.dev, tok, j.cfg.max_len, j.cfg.vocab),
                               encode(t.test, tok, j.cfg.max_len, j.cfg.vocab)});
        std::printf("albert_probe: %s (H %lld, N_max %d), %zu tasks, mode %s, device %s, precision %s, %d threads\n", o.checkpoint.c_str(),
                    static_cast<long long>(j.cfg.layer.dim), j.aopt.max_iterations, j.tasks.size(), o.mode.c_str(), B::name,
                    examples::precision_description(B::name).c_str(), max_threads());
        for (const auto& t : j.tasks)
            std::printf("  %-8s %3zu classes: %zu train / %zu dev / %zu test\n", t.name.c_str(), t.classes.size(), t.train.size(), t.dev.size(), t.test.size());
        std::filesystem::create_directories(o.out);

        // ---- 1. frozen probing, per iteration
        std::vector<probe_row> probes;
        if (o.mode != "finetune") {
            probes = j.run_probing();
            io::csv_writer csv({"task", "representation", "iteration", "accuracy", "accuracy_std", "seeds"});
            for (const auto& r : probes) csv.row(r.task, r.representation, static_cast<std::int64_t>(r.iteration), r.accuracy, r.accuracy_std, o.seeds);
            csv.write(o.out + "/probing.csv");
        }
        // ---- 2. fine-tuning with the ponder term, and the fixed-depth baseline
        std::vector<finetune_row> tuned;
        std::map<std::string, depth_tally> by_word;  // task → the first tau's ACT run
        if (o.mode != "probe") {
            for (const auto& t : j.tasks) {
                if (t.train.empty() || t.test.empty()) continue;
                for (std::size_t k = 0; k < o.tau.size(); ++k) {
                    depth_tally scratch;
                    auto& tally = k == 0 ? by_word[t.name] : scratch;
                    if (o.policy == "act_graves") tuned.push_back(j.template finetune_seeds<halting::act_graves>(t, o.tau[k], "act_graves", tally));
                    else if (o.policy == "act_ut") tuned.push_back(j.template finetune_seeds<halting::act_ut>(t, o.tau[k], "act_ut", tally));
                    else tuned.push_back(j.template finetune_seeds<halting::act>(t, o.tau[k], "act", tally));
                }
                depth_tally ignore;
                tuned.push_back(j.template finetune_seeds<halting::fixed>(t, 0.0, "fixed", ignore));
            }
            io::csv_writer csv({"task", "policy", "tau", "accuracy", "mean_iterations", "accuracy_std", "seeds"});
            for (const auto& r : tuned) csv.row(r.task, r.policy, r.tau, r.accuracy, r.mean_iterations, r.accuracy_std, o.seeds);
            csv.write(o.out + "/finetune.csv");
            io::csv_writer words({"task", "word_class", "tokens", "mean_iterations"});
            for (const auto& [task, tally] : by_word) {
                for (int r = 0; r < row_count; ++r)
                    if (tally.count[r] > 0) words.row(task, std::string(row_name(r)), tally.count[r], tally.sum[r] / static_cast<double>(tally.count[r]));
                if (tally.verbs) words.row(task, std::string("role:main_verb"), tally.verbs, tally.verb_sum / static_cast<double>(tally.verbs));
                if (tally.subjects) words.row(task, std::string("role:subject_head"), tally.subjects, tally.subject_sum / static_cast<double>(tally.subjects));
            }
            words.write(o.out + "/iterations_by_word.csv");
        }

        // ---- report.html
        report::html_page page("ACT-ALBERT: probing and fine-tuning with the ponder term",
                               "depthlab reproduction of Simoulin & Crabbé (2021) §3, checkpoint " + o.checkpoint);
        page.key_values({{"model", "H " + std::to_string(j.cfg.layer.dim) + ", N_max " + std::to_string(j.aopt.max_iterations) + ", vocab " +
                                       std::to_string(j.cfg.vocab)},
                         {"tasks", std::to_string(j.tasks.size()) + " (train/dev/test split by Brown document, balanced per class)"},
                         {"probe", std::string(o.mlp ? "MLP (256, GELU)" : "linear") + ", AdamW lr " + report::format_fixed(o.probe_lr, 4) + ", " + std::to_string(o.probe_epochs) +
                                       " epochs, test accuracy at the best dev epoch"},
                         {"fine-tuning", "AdamW lr " + report::format_fixed(o.lr, 5) + ", " + std::to_string(o.epochs) + " epochs, batch " + std::to_string(o.batch)}});
        if (!probes.empty()) {
            page.section("Frozen probing per iteration");
            page.paragraph("A probe trained on the state after iteration n (the halting as in pretraining, stopped at n). A curve that rises with n "
                           "says the later iterations add what the task needs.");
            for (const auto& t : j.tasks) {
                std::vector<report::line_series> series(2);
                series[0].name = "[CLS]", series[1].name = "mean of tokens";
                for (const auto& r : probes)
                    if (r.task == t.name) {
                        auto& s = series[r.representation == "cls" ? 0 : 1];
                        s.x.push_back(r.iteration), s.y.push_back(r.accuracy);
                    }
                if (series[0].x.empty()) continue;
                page.figure(report::line_chart(series, {.title = t.name, .subtitle = "chance " + report::format_fixed(100.0 / static_cast<double>(t.classes.size()), 1) + "%",
                                                        .x_label = "iteration", .y_label = "test accuracy (%)", .width = 480, .height = 300, .integer_x = true}));
            }
        }
        if (!tuned.empty()) {
            page.section("Fine-tuning with the ponder term");
            const std::map<std::string, std::string> paper = {{"Tense", "5.4"}, {"TopConst", "7.2"}};
            std::vector<std::vector<std::string>> rows;
            for (const auto& r : tuned) {
                const auto it = paper.find(r.task);
                const std::string accuracy = report::format_fixed(r.accuracy, 1) + (o.seeds > 1 ? " ± " + report::format_fixed(r.accuracy_std, 1) : "");
                rows.push_back({r.task, r.policy, report::format_fixed(r.tau, 5), accuracy, report::format_fixed(r.mean_iterations, 2), report::format_fixed(r.main_verb, 2), report::format_fixed(r.subject_head, 2),
                                it == paper.end() || r.policy == "fixed" ? "" : it->second + " (N_max 24)"});
            }
            page.table({"task", "policy", "tau", o.seeds > 1 ? "test accuracy (%, mean ± std over " + std::to_string(o.seeds) + " seeds)" : std::string("test accuracy (%)"),
                        "mean iterations", "main verbs", "subject heads", "paper: mean iterations"}, rows);
            page.section("Iterations by word class");
            std::vector<std::string> cats;
            for (int r = 0; r < row_count; ++r) cats.push_back(row_name(r));
            cats.push_back("main verb"), cats.push_back("subject head");
            std::vector<report::bar_series> bars;
            for (const auto& [task, tally] : by_word) {
                report::bar_series s{task, {}, {}};
                for (int r = 0; r < row_count; ++r) s.values.push_back(tally.count[r] ? tally.sum[r] / static_cast<double>(tally.count[r]) : NAN);
                s.values.push_back(tally.verbs ? tally.verb_sum / static_cast<double>(tally.verbs) : NAN);
                s.values.push_back(tally.subjects ? tally.subject_sum / static_cast<double>(tally.subjects) : NAN);
                bars.push_back(std::move(s));
            }
            page.figure(report::bar_chart(cats, bars, {.title = "Mean iterations per word class and role (fine-tuned ACT, test sets)",
                                                       .y_label = "mean iterations", .width = 960, .height = 420}),
                        "A word's iterations are those of its first piece; later pieces are counted as continuation_piece.");
        }
        page.provenance("depthlab examples/albert_probe, seed " + std::to_string(o.seed));
        page.write(o.out + "/report.html");
        std::printf("outputs: %s/{%s%sreport.html}\n", o.out.c_str(), probes.empty() ? "" : "probing.csv,",
                    tuned.empty() ? "" : "finetune.csv,iterations_by_word.csv,");
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "albert_probe: %s\n", examples::failure_message(e).c_str());
        return 1;
    }
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    examples::cli args("albert_probe", "Probe and fine-tune a pretrained ACT-ALBERT on Brown tasks: which tasks and words use more depth.");
    args.section("Model")
        .option("checkpoint", o.checkpoint, "albert_act's checkpoint.safetensors")
        .section("Data")
        .option("data", o.data, "directory with brown.tagged.txt, documents.tsv and spm.model (scripts/fetch-data english, scripts/train-tokenizer)")
        .option("tasks", o.tasks, "all, or a list of SentLen, WC, BShift, Tense, SubjNum, ObjNum, CoordInv, Genre").list()
        .option("max-train", o.max_train, "training examples per task at most (after balancing)").range<std::int64_t>(2, 1 << 30)
        .option("max-eval", o.max_eval, "dev and test examples per task at most").range<std::int64_t>(2, 1 << 30)
        .option("seed", o.seed, "random seed (splits, probes, heads)")
        .section("Analyses")
        .option("mode", o.mode, "probe | finetune | both").one_of({"probe", "finetune", "both"})
        .option("probe-epochs", o.probe_epochs, "probe training epochs").range<std::int64_t>(1, 10000)
        .option("seeds", o.seeds, "repeat every probe and fine-tuning run with this many seeds and report the mean and standard deviation "
                                  "(the first seed's run is --seed's)").range<std::int64_t>(1, 1000)
        .option("probe-lr", o.probe_lr, "probe learning rate").positive()
        .flag("mlp", o.mlp, "probe with one hidden layer (256, GELU) instead of a linear map")
        .section("Fine-tuning")
        .option("policy", o.policy, "fine-tuning halting: act (the paper) | act_graves | act_ut; a fixed-depth baseline always runs").one_of({"act", "act_graves", "act_ut"})
        .option("tau", o.tau, "ponder weights for fine-tuning, a list (the paper 5e-4; 0: no penalty, as the official runs)").list()
        .option("epochs", o.epochs, "fine-tuning epochs").range<std::int64_t>(1, 1000)
        .option("lr", o.lr, "fine-tuning peak learning rate").positive()
        .option("batch", o.batch, "fine-tuning batch").range<std::int64_t>(1, 1 << 16)
        .section("Output")
        .option("out", o.out, "output directory")
        .section("Device")
        .option("device", o.device, examples::device_help).one_of({"cpu", "cuda", "host_device"})
        .option("precision", o.precision, examples::precision_help).one_of({"auto", "f32", "bf16"});
    args.sizes({"batch", "max-len"});
    args.parse(argc, argv);
    for (const double t : o.tau)
        if (!(t >= 0 && std::isfinite(t))) {
            std::fprintf(stderr, "albert_probe: --tau: %g is not a finite number >= 0\n", t);
            return 2;
        }
    args.save_config(o.out);
    examples::use_precision(o.precision, o.device);
    return examples::on_device(o.device, "albert_probe", [&](auto tag) { return run<decltype(tag)>(o); });
}
