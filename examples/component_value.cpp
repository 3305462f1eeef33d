// component_value: the translation study of Wang & Tu (COLING 2020), "Rethinking the Value
// of Transformer Components", end to end on the English->German Ding sentence pairs
// (scripts/fetch-data translation):
//
//   1. train an encoder-decoder Transformer (or load one with --checkpoint): joint
//      sentencepiece vocabulary, shared embeddings tied to the output, label smoothing 0.1,
//      Adam (0.9, 0.98) with inverse-square-root warm-up, batches by token count; the
//      initial weights θ⁰ are kept (and saved in the checkpoint) for rewinding;
//   2. baseline test BLEU (sacreBLEU's default corpus BLEU on detokenised text), greedy and
//      beam search with the key/value cache (nn/decoding.hpp);
//   3. the analyses of analysis/component_value.hpp with BLEU on the first --eval-sentences
//      test sentences as the metric: contribution (ablation), criticality (rewinding by
//      interpolation), pruning curves, rewinding + fine-tuning;
//   4. <out>/contribution.csv, criticality.csv (+ criticality_trace.csv: every α tried),
//      pruning.csv (+ pruning_criticality.csv), rewinding.csv, metrics.jsonl, summary.json,
//      report.html.
//
// Presets (--preset):
//   tiny   2+2 layers, d 128, 4 heads, FF 512,  dropout 0.1   smoke runs (minutes)
//   small  3+3 layers, d 256, 4 heads, FF 1024, dropout 0.1   the size that trains on 2 cores
//   base   6+6 layers, d 512, 8 heads, FF 2048, dropout 0.1   the paper's Transformer-base
//
//   build-cv/examples/component_value --preset tiny --steps 300 --eval-sentences 100 --out runs/cv-smoke
//   build-cv/examples/component_value --checkpoint runs/cv/checkpoint.safetensors --out runs/cv-again
//
// The recipe of docs/results/component_value (scripts/fetch-data translation-mt: the 99k
// machine-translated pairs too, tokenizer trained on both), one thread per run:
//   component_value --preset small --with-mt --ding-repeat 3 --steps 3600 --max-tokens 4096
//       --warmup 1000 --dec-layers 2 --skip-analyses --out runs/cv-shallow        # the comparison
//   component_value --preset small --with-mt --ding-repeat 3 --steps 3600 --max-tokens 4096
//       --warmup 1000 --eval-sentences 500 --rewind-steps 200
//       --shallow-checkpoint runs/cv-shallow/checkpoint.safetensors --out runs/cv-mt
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <depthlab/depthlab.hpp>
#include <depthlab/data/tokenizer.hpp>

#include "common/cli.hpp"
#include "common/device.hpp"

using namespace depthlab;
template <class B>
using Model = nn::Seq2SeqTransformer<float, B>;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

// ------------------------------------------------------------------------------------ options
struct options {
    std::string preset = "small";
    std::int64_t enc_layers = 0, dec_layers = 0, dim = 0, heads = 0, ff = 0;  // 0: the preset's
    double dropout = -1;                                                       // < 0: the preset's
    std::int64_t steps = 4000, max_tokens = 4096, warmup = 1000, log_every = 50, save_every = 500, dev_every = 500, dev_sentences = 200;
    double lr = 1e-3, clip = 1.0, label_smoothing = 0.1, max_train_minutes = 0;
    std::uint64_t seed = 1;
    std::string data = ".data/translation", out = "runs/component_value", checkpoint, device = "cpu";
    bool resume = false, with_mt = false, skip_analyses = false;
    // decoding and analyses
    std::int64_t beam = 4, analysis_beam = 1, eval_sentences = 200, decode_batch = 100, grid_steps = 10, max_evaluations = 8,
                 prune_max_k = 8, rewind_steps = 200;
    double alpha = 0.6, epsilon = 0.5, rewind_lr = 0, tolerance = 1.0 / 16;
    std::string search = "grid", rewind_k = "0,2,4", rank_by = "contribution";
    std::int64_t compare_shallow = 0;  // > 0: also train a model with this many fewer decoder layers
    std::string shallow_checkpoint;    // a separately trained shallower model to compare with pruning
    std::int64_t ding_repeat = 1;      // with --with-mt: the Ding pairs appear this many times per epoch
};

struct preset_spec {
    const char* name;
    int enc, dec;
    index_t dim;
    int heads;
    index_t ff;
    double dropout;
};
constexpr preset_spec presets[] = {
    {"tiny", 2, 2, 128, 4, 512, 0.1},
    {"small", 3, 3, 256, 4, 1024, 0.1},
    {"base", 6, 6, 512, 8, 2048, 0.1},
};

nn::seq2seq_config model_config(const options& o, index_t vocab) {
    const preset_spec* p = nullptr;
    for (const auto& q : presets)
        if (o.preset == q.name) p = &q;
    DEPTHLAB_CHECK(p != nullptr, usage_error, "--preset: '", o.preset, "' is not one of tiny, small, base");
    nn::seq2seq_config c;
    c.src_vocab = c.tgt_vocab = vocab;
    c.share_embeddings = true;
    c.tie_output = true;
    c.encoder_layers = o.enc_layers > 0 ? static_cast<int>(o.enc_layers) : p->enc;
    c.decoder_layers = o.dec_layers > 0 ? static_cast<int>(o.dec_layers) : p->dec;
    c.max_len = 256;
    c.layer.dim = o.dim > 0 ? o.dim : p->dim;
    c.layer.heads = o.heads > 0 ? static_cast<int>(o.heads) : p->heads;
    c.layer.ff_dim = o.ff > 0 ? o.ff : p->ff;
    c.layer.dropout = c.layer.attention_dropout = o.dropout >= 0 ? o.dropout : p->dropout;
    c.layer.act = nn::activation::relu;
    c.layer.norm_first = false;  // post-LN, as the paper
    c.layer.init = nn::init_scheme::xavier;
    return c;
}

std::string describe(const nn::seq2seq_config& c) {
    std::ostringstream os;
    os << c.encoder_layers << "+" << c.decoder_layers << " layers, d " << c.layer.dim << ", " << c.layer.heads << " heads, FF "
       << c.layer.ff_dim << ", dropout " << c.layer.dropout << ", vocab " << c.src_vocab << " (joint, shared + tied)";
    return os.str();
}

// ------------------------------------------------------------------------------------ data
struct text_split {
    std::vector<std::string> src, tgt;
    std::vector<data::token_pair> pairs;
};

text_split load_split(const data::tokenizer& tok, const std::string& dir, const std::string& split, std::size_t limit = 0) {
    const data::parallel_text p = data::load_translation_split(dir, split);
    text_split s;
    const std::size_t n = limit > 0 ? std::min(limit, p.size()) : p.size();
    for (std::size_t i = 0; i < n; ++i) {
        const auto a = tok.encode(p.src[i]);
        const auto b = tok.encode(p.tgt[i]);
        s.pairs.push_back({{a.begin(), a.end()}, {b.begin(), b.end()}});
        s.src.push_back(p.src[i]);
        s.tgt.push_back(p.tgt[i]);
    }
    return s;
}

/// Sentences to translate, sorted by source length and cut into batches.
struct eval_set {
    std::string name;
    std::vector<std::string> refs;
    std::vector<nn::token_batch> batches;
    std::vector<std::vector<std::size_t>> members;
    [[nodiscard]] std::size_t size() const { return refs.size(); }
};

eval_set make_eval_set(const std::string& name, const text_split& s, std::size_t n, std::size_t batch_sentences, index_t max_src) {
    eval_set e;
    e.name = name;
    n = std::min(n, s.pairs.size());
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.pairs[a].src.size() < s.pairs[b].src.size(); });
    for (std::size_t i = 0; i < n; ++i) e.refs.push_back(s.tgt[i]);
    for (std::size_t i = 0; i < n; i += batch_sentences) {
        std::vector<std::vector<std::int64_t>> srcs;
        std::vector<std::size_t> idx;
        for (std::size_t j = i; j < std::min(n, i + batch_sentences); ++j) {
            auto ids = s.pairs[order[j]].src;
            if (static_cast<index_t>(ids.size()) > max_src) ids.resize(static_cast<std::size_t>(max_src));  // very long sources are cut
            srcs.push_back(std::move(ids));
            idx.push_back(order[j]);
        }
        e.batches.push_back(nn::make_source_batch(srcs, 3, 0));
        e.members.push_back(std::move(idx));
    }
    return e;
}

// ------------------------------------------------------------------------------------ translation + BLEU
/// Translates eval sets; reuses the encoder output of the last set it translated as long
/// as nothing on the encoder side changed (parameters compared exactly, sub-layers on/off).
template <class B>
class translator {
public:
    translator(Model<B>& m, const data::tokenizer& tok) : model_(m), tok_(tok) {
        for (auto& [name, p] : m.named_parameters())
            if (name.rfind("src_embed", 0) == 0 || name.rfind("encoder", 0) == 0) encoder_params_.push_back(p);
        for (auto& [name, r] : nn::sublayers(static_cast<nn::Module<float, B>&>(m)))
            if (name.rfind("encoder.", 0) == 0) encoder_sublayers_.push_back(r);
    }

    std::vector<std::string> translate(const eval_set& es, const nn::search_options& o) {
        DEPTHLAB_CHECK(!model_.is_training(), usage_error, "translator: the model is in training mode");
        no_grad guard;
        const bool reuse = cache_owner_ == &es && encoder_unchanged();
        if (!reuse) {
            memories_.clear();
            for (const auto& b : es.batches) memories_.push_back(model_.encode(b));
            remember_encoder();
            cache_owner_ = &es;
            ++encoder_runs_;
        } else {
            ++encoder_reuses_;
        }
        std::vector<std::string> hyps(es.size());
        for (std::size_t i = 0; i < es.batches.size(); ++i) {
            const auto out = nn::generate(model_, memories_[i], es.batches[i], o);
            for (std::size_t j = 0; j < out.size(); ++j) hyps[es.members[i][j]] = tok_.decode(out[j].tokens);
        }
        return hyps;
    }
    double bleu(const eval_set& es, const nn::search_options& o, std::vector<std::string>* hyps_out = nullptr) {
        auto hyps = translate(es, o);
        const double b = metrics::corpus_bleu(hyps, es.refs).score;
        if (hyps_out) *hyps_out = std::move(hyps);
        return b;
    }
    void invalidate() { cache_owner_ = nullptr; }
    [[nodiscard]] std::size_t encoder_runs() const { return encoder_runs_; }
    [[nodiscard]] std::size_t encoder_reuses() const { return encoder_reuses_; }

private:
    bool encoder_unchanged() const {
        for (std::size_t i = 0; i < encoder_sublayers_.size(); ++i)
            if (encoder_sublayers_[i]->enabled != enabled_[i]) return false;
        for (std::size_t i = 0; i < encoder_params_.size(); ++i) {
            const auto& v = encoder_params_[i].value();
            if constexpr (B::host_accessible) {
                if (std::memcmp(v.data(), values_[i].data(), sizeof(float) * values_[i].size()) != 0) return false;
            } else if (v.to_vector() != values_[i]) {  // a device: one download per parameter
                return false;
            }
        }
        return true;
    }
    void remember_encoder() {
        enabled_.clear();
        for (auto* r : encoder_sublayers_) enabled_.push_back(r->enabled);
        values_.clear();
        for (auto& p : encoder_params_) values_.push_back(p.value().to_vector());
    }

    Model<B>& model_;
    const data::tokenizer& tok_;
    std::vector<Var<float, B>> encoder_params_;
    std::vector<nn::residual_base*> encoder_sublayers_;
    const eval_set* cache_owner_ = nullptr;
    std::vector<Var<float, B>> memories_;
    std::vector<bool> enabled_;
    std::vector<std::vector<float>> values_;
    std::size_t encoder_runs_ = 0, encoder_reuses_ = 0;
};

// ------------------------------------------------------------------------------------ training
struct train_outcome {
    std::int64_t steps = 0;
    double seconds = 0, tokens_per_s = 0, final_lr = 0;
    bool stopped_by_time = false;
};

/// One micro-batch of translation training: the label-smoothed cross-entropy of the next batch.
template <class B>
train::micro_batch<float, B> translation_loss(Model<B>& model, data::translation_stream& stream, double label_smoothing) {
    const auto b = stream.next();
    auto loss = cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out, -100, static_cast<float>(label_smoothing));
    return {.loss = loss, .logged = {{"loss", loss}}, .tokens = b.target_tokens()};
}

optim::AdamOptions adam_options(double lr) {
    optim::AdamOptions a;
    a.lr = lr;
    a.beta1 = 0.9;
    a.beta2 = 0.98;
    a.eps = 1e-9;
    a.weight_decay = 0;
    return a;
}

std::vector<int> parse_int_list(const std::string& s, const char* flag) {
    std::vector<int> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) {
        if (item.empty()) continue;
        std::size_t used = 0;
        int v = 0;
        try {
            v = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        DEPTHLAB_CHECK(used == item.size() && v >= 0, usage_error, flag, ": '", item, "' is not a non-negative integer");
        out.push_back(v);
    }
    return out;
}

std::string fixed(double v, int decimals = 2) { return report::format_fixed(v, decimals); }
std::string sci(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2e", v);
    return buf;
}

/// Importance for ranking: the score, ties broken by a finer (unclipped) measure, returned
/// as rank positions 0..n-1 (analysis::least_important_first then follows this order).
std::vector<double> rank_with_ties(const std::vector<double>& score, const std::vector<double>& tie) {
    std::vector<std::size_t> idx(score.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
        if (score[a] != score[b]) return score[a] < score[b];
        return tie[a] < tie[b];
    });
    std::vector<double> pos(score.size());
    for (std::size_t i = 0; i < idx.size(); ++i) pos[idx[i]] = static_cast<double>(i);
    return pos;
}

std::string git_commit() {
    std::string out;
    if (FILE* p = popen("git rev-parse --short HEAD 2>/dev/null", "r")) {
        char buf[64];
        while (std::fgets(buf, sizeof buf, p)) out += buf;
        pclose(p);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out.empty() ? "unknown" : out;
}

// ------------------------------------------------------------------------------------ findings
const std::vector<std::string> kTypes = {"E:SA", "E:FF", "D:SA", "D:EA", "D:FF"};

struct score_view {
    std::string name;                   // "contribution" / "criticality"
    std::map<std::string, double> by_module;
    std::map<std::string, std::pair<std::string, int>> where;  // module -> (type, layer)
};

double mean_of(const score_view& v, const std::function<bool(const std::string&, int)>& pick) {
    double s = 0;
    int n = 0;
    for (const auto& [m, val] : v.by_module) {
        const auto& [type, layer] = v.where.at(m);
        if (pick(type, layer)) {
            s += val;
            ++n;
        }
    }
    return n ? s / n : std::numeric_limits<double>::quiet_NaN();
}

struct finding {
    std::string claim, ours;
    bool holds = false;
};

std::vector<finding> check_findings(const score_view& v, int enc_layers, int dec_layers) {
    std::vector<finding> out;
    std::map<std::string, double> type_mean;
    for (const auto& t : kTypes) type_mean[t] = mean_of(v, [&](const std::string& ty, int) { return ty == t; });
    auto type_list = [&] {
        std::vector<std::pair<double, std::string>> s;
        for (const auto& [t, m] : type_mean) s.emplace_back(m, t);
        std::sort(s.begin(), s.end());
        std::string r;
        for (const auto& [m, t] : s) r += (r.empty() ? "" : " < ") + t + " " + fixed(m);
        return r;
    }();
    auto lowest = std::min_element(type_mean.begin(), type_mean.end(), [](auto& a, auto& b) { return a.second < b.second; });
    auto highest = std::max_element(type_mean.begin(), type_mean.end(), [](auto& a, auto& b) { return a.second < b.second; });
    out.push_back({"D:SA is the least important module type (lowest mean score)", type_list, lowest->first == "D:SA"});
    out.push_back({"D:FF is the most important module type (highest mean score)", "highest: " + highest->first + " " + fixed(highest->second),
                   highest->first == "D:FF"});
    const int eh = enc_layers / 2, dh = dec_layers / 2;
    const double enc_low = mean_of(v, [&](const std::string& t, int l) { return t[0] == 'E' && l < eh; });
    const double enc_high = mean_of(v, [&](const std::string& t, int l) { return t[0] == 'E' && l >= enc_layers - eh; });
    out.push_back({"lower encoder modules matter more than upper ones",
                   "bottom " + std::to_string(eh) + ": " + fixed(enc_low) + " vs top " + std::to_string(eh) + ": " + fixed(enc_high),
                   enc_low > enc_high});
    const double dec_low = mean_of(v, [&](const std::string& t, int l) { return t[0] == 'D' && l < dh; });
    const double dec_high = mean_of(v, [&](const std::string& t, int l) { return t[0] == 'D' && l >= dec_layers - dh; });
    out.push_back({"upper decoder modules matter more than lower ones",
                   "bottom " + std::to_string(dh) + ": " + fixed(dec_low) + " vs top " + std::to_string(dh) + ": " + fixed(dec_high),
                   dec_high > dec_low});
    const double ea_low = mean_of(v, [&](const std::string& t, int l) { return t == "D:EA" && l < dh; });
    const double ea_high = mean_of(v, [&](const std::string& t, int l) { return t == "D:EA" && l >= dec_layers - dh; });
    out.push_back({"upper D:EA matter more than lower D:EA", "bottom " + fixed(ea_low) + " vs top " + fixed(ea_high), ea_high > ea_low});
    return out;
}

}  // namespace

/// The whole study on backend B (picked by --device).
template <class B>
int run(options o, const std::string& command_line) {

    try {
        const auto t_start = clock_type::now();
        std::filesystem::create_directories(o.out);
        const auto rewind_ks = parse_int_list(o.rewind_k, "--rewind-k");

        // --checkpoint: the training recipe (batch tokens, lr schedule, label smoothing, clip,
        // seed) is the checkpoint's, so that rewinding fine-tunes the way training did.
        if (!o.checkpoint.empty()) {
            io::training_state<float> md;
            md.metadata = io::safetensors_file(o.checkpoint).metadata();
            auto has = [&](const char* k) { return md.metadata.count(k) > 0; };
            if (has("train.lr")) o.lr = md.get_double("train.lr");
            if (has("train.warmup")) o.warmup = static_cast<std::int64_t>(md.get_u64("train.warmup"));
            if (has("train.max_tokens")) o.max_tokens = static_cast<std::int64_t>(md.get_u64("train.max_tokens"));
            if (has("train.label_smoothing")) o.label_smoothing = md.get_double("train.label_smoothing");
            if (has("train.clip")) o.clip = md.get_double("train.clip");
            if (has("train.seed")) o.seed = md.get_u64("train.seed");
        }

        // ---- data
        const data::tokenizer tok(o.data + "/spm.model");
        auto t0 = clock_type::now();
        text_split train = load_split(tok, o.data, "train");
        const std::size_t ding_pairs = train.pairs.size();
        if (o.with_mt) {
            // The test split is Ding's (dictionary example sentences); repeating the in-domain
            // pairs keeps them a sizeable share of each epoch next to ~7x more MT pairs.
            for (std::int64_t r = 1; r < o.ding_repeat; ++r)
                for (std::size_t i = 0; i < ding_pairs; ++i) train.pairs.push_back(train.pairs[i]);
            text_split mt = load_split(tok, o.data, "mt");
            for (auto& p : mt.pairs) train.pairs.push_back(std::move(p));
        }
        const text_split dev = load_split(tok, o.data, "dev", static_cast<std::size_t>(o.dev_sentences));
        const text_split test = load_split(tok, o.data, "test");
        data::translation_batching bc;
        bc.max_tokens = o.max_tokens;
        bc.max_len = 128;
        bc.window = 0;
        const data::translation_batcher batcher(std::move(train.pairs), bc);
        std::printf("data: %zu training pairs (%zu Ding%s%s, %zu dropped as too long), %zu dev, %zu test; vocab %lld; tokenised in %.1fs\n",
                    batcher.size(), ding_pairs, o.with_mt && o.ding_repeat > 1 ? (" x" + std::to_string(o.ding_repeat)).c_str() : "",
                    o.with_mt ? " + mt" : "", batcher.dropped(), dev.pairs.size(), test.pairs.size(),
                    static_cast<long long>(tok.vocab_size()), seconds_since(t0));

        // ---- model
        nn::seq2seq_config cfg = model_config(o, tok.vocab_size());
        std::string metrics_path = o.out + "/metrics.jsonl";
        if (!o.checkpoint.empty()) {
            const io::safetensors_file f(o.checkpoint);
            cfg = io::load_config<nn::seq2seq_config>(f.metadata(), "config.");
            metrics_path = (std::filesystem::path(o.checkpoint).parent_path() / "metrics.jsonl").string();
        }
        Model<B> model(cfg, o.seed);
        nn::Snapshot<float, B> theta0(model);  // θ⁰, right after initialisation
        optim::Adam<float, B> adam(model.named_parameters(), adam_options(o.lr));
        const optim::inverse_sqrt schedule(o.lr, o.warmup);
        data::translation_stream stream(batcher, o.seed + 1);
        std::printf("model: %s; %lld parameters; device %s, ISA %s, %d threads\n", describe(cfg).c_str(),
                    static_cast<long long>(model.parameter_count()), B::name, cpu::to_string(cpu::active_isa()), max_threads());

        // ---- training (train::Trainer), or the run of --checkpoint
        train::Trainer<float, B> trainer(model, adam, {.steps = o.steps, .clip = o.clip, .log_every = o.log_every, .eval_every = o.dev_every,
                                                       .save_every = o.save_every, .max_train_minutes = o.max_train_minutes, .out = o.out,
                                                       .resume = o.resume});
        auto& ckpt = trainer.checkpoint();
        const auto save_theta0 = [&] { return theta0.tensors(); };
        const auto restore_theta0 = [&](const typename train::checkpointer<float, B>::tensor_list& t0s) {
            const nn::Snapshot<float, B> current(model);
            for (const auto& [name, t] : t0s) model.parameter(name).value().copy_(t);
            theta0 = nn::Snapshot<float, B>(model);
            current.restore(model);
        };
        ckpt.track_tensors("theta0", save_theta0, restore_theta0);
        ckpt.track("data", [&] {
            const auto st = stream.state();
            return io::metadata_map{{"epoch_seed", std::to_string(st.epoch_seed)}, {"epoch_offset", std::to_string(st.epoch_offset)},
                                    {"next_batch", std::to_string(st.next_batch)}, {"epoch", std::to_string(st.epoch)}};
        }, [&](const io::metadata_map& m) {
            stream.set_state({train::state_u64(m, "epoch_seed"), train::state_u64(m, "epoch_offset"), train::state_u64(m, "next_batch"),
                              train::state_u64(m, "epoch")});
        });
        ckpt.track("model", model.rng());  // dropout during rewinding continues as in the original run
        io::save_config(ckpt.metadata(), "config.", cfg);
        ckpt.metadata()["preset"] = o.preset;
        io::training_state<float> recipe;
        recipe.set_double("train.lr", o.lr);
        recipe.set_u64("train.warmup", static_cast<std::uint64_t>(o.warmup));
        recipe.set_u64("train.max_tokens", static_cast<std::uint64_t>(o.max_tokens));
        recipe.set_double("train.label_smoothing", o.label_smoothing);
        recipe.set_double("train.clip", o.clip);
        recipe.set_u64("train.seed", o.seed);
        ckpt.metadata().insert(recipe.metadata.begin(), recipe.metadata.end());
        trainer.schedule = [&](std::int64_t done) { return schedule.lr(done + 1); };
        trainer.log_extra = [&](std::int64_t) { return train::log_values{{"epoch", static_cast<double>(stream.epoch())}}; };
        nn::search_options dev_search;  // greedy
        translator<B> trans(model, tok);
        const eval_set dev_set = make_eval_set("dev", dev, dev.pairs.size(), static_cast<std::size_t>(o.decode_batch), cfg.max_len / 2);
        trainer.evaluate = [&](std::int64_t, bool) {
            std::vector<std::string> hyps;
            const auto t_dev = clock_type::now();
            const double b = trans.bleu(dev_set, dev_search, &hyps);
            std::printf("  dev BLEU %.2f: \"%s\" -> \"%s\" (ref \"%s\")\n", b, dev.src[0].c_str(), hyps[0].c_str(), dev.tgt[0].c_str());
            return nlohmann::ordered_json{{"dev_bleu", b}, {"dev_seconds", seconds_since(t_dev)}};
        };
        std::int64_t step = 0;
        train_outcome trained;
        if (!o.checkpoint.empty()) {
            train::checkpointer<float, B> reader(o.checkpoint);  // parameters, θ⁰ and the dropout stream; no optimiser state
            reader.track_tensors("theta0", save_theta0, restore_theta0);
            reader.track("model", model.rng());
            step = reader.load(model, nullptr);
            std::printf("loaded %s (step %lld); no training\n", o.checkpoint.c_str(), static_cast<long long>(step));
        } else {
            const train::fit_result fit = trainer.fit([&] { return translation_loss(model, stream, o.label_smoothing); });
            step = fit.steps;
            trained.seconds = fit.seconds;
            trained.stopped_by_time = fit.stopped_by_time;
        }
        trained.steps = step;
        trained.final_lr = schedule.lr(std::max<std::int64_t>(step, 1));
        model.eval();

        // ---- baseline BLEU
        const auto t_base = clock_type::now();
        const eval_set test_set = make_eval_set("test", test, test.pairs.size(), static_cast<std::size_t>(o.decode_batch), cfg.max_len / 2);
        // beam search decodes beam rows per sentence: fewer sentences per batch keep the cache small
        const eval_set test_set_beam = make_eval_set("test-beam", test, test.pairs.size(),
                                                     static_cast<std::size_t>(std::max<std::int64_t>(1, o.decode_batch / std::max<std::int64_t>(1, o.beam))),
                                                     cfg.max_len / 2);
        nn::search_options beam_search;
        beam_search.beam = static_cast<int>(o.beam);
        beam_search.alpha = o.alpha;
        nn::search_options greedy;
        std::vector<std::string> test_hyps;
        const double test_bleu_greedy = trans.bleu(test_set, greedy);
        const double t_greedy = seconds_since(t_base);
        const auto t_beam0 = clock_type::now();
        const double test_bleu_beam = o.beam > 1 ? trans.bleu(test_set_beam, beam_search, &test_hyps) : test_bleu_greedy;
        const double t_beam = seconds_since(t_beam0);
        if (o.beam <= 1) test_hyps = trans.translate(test_set, greedy);
        const double test_chrf = metrics::corpus_chrf(test_hyps, test_set.refs).score;
        {
            std::ofstream f(o.out + "/test_hypotheses.txt");
            for (const auto& h : test_hyps) f << h << "\n";
        }
        std::printf("test BLEU (%zu sentences): greedy %.2f (%.1fs), beam %lld %.2f (%.1fs); chrF %.2f\n", test_set.size(), test_bleu_greedy,
                    t_greedy, static_cast<long long>(o.beam), test_bleu_beam, t_beam, test_chrf);
        for (std::size_t i = 0; i < 3 && i < test_hyps.size(); ++i)
            std::printf("  \"%s\"\n   -> \"%s\"\n  ref \"%s\"\n", test.src[i].c_str(), test_hyps[i].c_str(), test.tgt[i].c_str());

        nlohmann::json summary;
        summary["command"] = command_line;
        summary["git_commit"] = git_commit();
        summary["model"] = describe(cfg);
        summary["preset"] = o.preset;
        summary["parameters"] = model.parameter_count();
        summary["steps"] = step;
        summary["train_seconds"] = trained.seconds;
        summary["stopped_by_time"] = trained.stopped_by_time;
        summary["threads"] = max_threads();
        summary["test_sentences"] = test_set.size();
        summary["test_bleu_greedy"] = test_bleu_greedy;
        summary["test_bleu_beam"] = test_bleu_beam;
        summary["test_chrf"] = test_chrf;
        summary["beam"] = o.beam;
        summary["length_penalty"] = "gnmt alpha " + std::to_string(o.alpha);
        auto write_summary = [&] {
            std::ofstream f(o.out + "/summary.json");
            f << summary.dump(2) << "\n";
        };
        write_summary();
        if (o.skip_analyses) {
            std::printf("--skip-analyses: done in %s\n", train::format_duration(seconds_since(t_start)).c_str());
            return 0;
        }

        // ---- analyses
        const eval_set analysis_set = make_eval_set(
            "analysis", test, static_cast<std::size_t>(o.eval_sentences),
            static_cast<std::size_t>(std::max<std::int64_t>(1, o.decode_batch / std::max<std::int64_t>(1, o.analysis_beam))), cfg.max_len / 2);
        nn::search_options metric_search;
        metric_search.beam = static_cast<int>(o.analysis_beam);
        metric_search.alpha = o.alpha;
        std::size_t metric_calls = 0;
        double metric_seconds = 0;
        const analysis::metric_fn metric = [&] {
            const auto t = clock_type::now();
            const double b = trans.bleu(analysis_set, metric_search);
            metric_seconds += seconds_since(t);
            ++metric_calls;
            return b;
        };
        const auto modules = analysis::default_modules(model);
        const nn::Snapshot<float, B> thetaf(model);
        analysis::run_options run;
        run.print_progress = true;

        const auto t_an = clock_type::now();
        const double base = metric();
        std::printf("analysis metric: BLEU of %s decoding on the first %zu test sentences = %.2f (%.2fs per evaluation)\n",
                    o.analysis_beam > 1 ? "beam" : "greedy", analysis_set.size(), base, metric_seconds);
        summary["analysis_sentences"] = analysis_set.size();
        summary["analysis_beam"] = o.analysis_beam;
        summary["analysis_base_bleu"] = base;

        analysis::contribution_options copt;
        copt.base = base;
        copt.run = run;
        const auto t_c = clock_type::now();
        const auto contrib = analysis::contribution(modules, metric, copt);
        const double s_contrib = seconds_since(t_c);
        analysis::write_csv(o.out + "/contribution.csv", contrib);
        std::printf("contribution: %zu modules in %s; clip C = %.3f, largest drop %.3f%s\n", modules.size(),
                    train::format_duration(s_contrib).c_str(), contrib.clip, contrib.max_drop, contrib.all_zero ? " (ALL ZERO)" : "");

        analysis::criticality_options kopt;
        kopt.base = base;
        kopt.epsilon = o.epsilon;
        kopt.method = o.search == "grid" ? analysis::search_method::grid : analysis::search_method::bisection;
        kopt.grid_steps = static_cast<int>(o.grid_steps);
        kopt.tolerance = o.tolerance;
        kopt.max_evaluations = static_cast<int>(o.max_evaluations);
        kopt.run = run;
        const auto t_k = clock_type::now();
        const auto crit = analysis::criticality(model, modules, theta0, thetaf, metric, kopt);
        const double s_crit = seconds_since(t_k);
        analysis::write_csv(o.out + "/criticality.csv", crit);
        {
            std::ofstream f(o.out + "/criticality_trace.csv");
            f << "module,alpha,metric\n";
            for (const auto& e : crit.modules)
                for (const auto& [a, m] : e.trace) f << e.name << ',' << a << ',' << m << '\n';
        }
        std::printf("criticality (%s): %zu evaluations in %s\n", o.search.c_str(), crit.evaluations, train::format_duration(s_crit).c_str());
        const double rho = analysis::rank_correlation(contrib, crit);
        std::printf("Spearman rank correlation contribution vs criticality: %.3f\n", rho);

        // Rankings for pruning and rewinding: the score, ties broken by the unclipped BLEU drop
        // (contribution: base − BLEU without the module; criticality: base − BLEU at α = 0).
        std::vector<double> raw_drop, drop_at_zero;
        for (const auto& e : contrib.modules) raw_drop.push_back(base - e.metric_without);
        for (const auto& e : crit.modules) drop_at_zero.push_back(e.trace.empty() ? 0.0 : base - e.trace.front().second);
        const auto rank_c = rank_with_ties(contrib.scores(), raw_drop);
        const auto rank_k = rank_with_ties(crit.scores(), drop_at_zero);
        const int K = static_cast<int>(std::min<std::int64_t>(o.prune_max_k, static_cast<std::int64_t>(modules.size())));
        const auto t_p = clock_type::now();
        const auto prune_c = analysis::pruning_curve(model, modules, rank_c, metric, K, run);
        const auto prune_k = analysis::pruning_curve(model, modules, rank_k, metric, K, run);
        const double s_prune = seconds_since(t_p);
        analysis::write_csv(o.out + "/pruning.csv", prune_c);
        analysis::write_csv(o.out + "/pruning_criticality.csv", prune_k);

        // rewinding: fine-tune the whole model after rewinding the k least important modules
        const double ft_lr = o.rewind_lr > 0 ? o.rewind_lr : trained.final_lr;
        const auto finetune = [&](int k) {
            optim::Adam<float, B> ft(model.named_parameters(), adam_options(ft_lr));
            data::translation_stream batches(batcher, o.seed + 1000);  // the same batches for every k
            train::Trainer<float, B> fine_tune(model, ft, {.steps = o.rewind_steps, .clip = o.clip, .log_every = o.rewind_steps});
            const double warm = static_cast<double>(std::max<std::int64_t>(1, std::min<std::int64_t>(50, o.rewind_steps / 5)));
            fine_tune.schedule = [&](std::int64_t done) { return ft_lr * std::min(1.0, static_cast<double>(done + 1) / warm); };
            const auto r = fine_tune.fit([&] { return translation_loss(model, batches, o.label_smoothing); });
            trans.invalidate();
            std::fprintf(stderr, "rewinding: k=%d fine-tuned %lld steps at lr %.2e, mean loss %.3f\n", k, static_cast<long long>(o.rewind_steps),
                         ft_lr, r.last_log.front().second);
        };
        const auto& rank_scores = o.rank_by == "contribution" ? rank_c : rank_k;
        std::vector<analysis::rewinding_point> rewound;
        const auto t_r = clock_type::now();
        if (!rewind_ks.empty() && o.rewind_steps > 0)
            rewound = analysis::rewinding_curve(static_cast<nn::Module<float, B>&>(model), modules, rank_scores, rewind_ks, theta0, thetaf, metric,
                                                finetune, run);
        const double s_rewind = seconds_since(t_r);
        model.eval();
        trans.invalidate();
        analysis::write_csv(o.out + "/rewinding.csv", rewound);

        // optional: a shallower decoder trained the same way, here (--compare-shallow) or in a
        // separate run (--shallow-checkpoint: e.g. trained in parallel on the other core)
        double shallow_bleu = std::numeric_limits<double>::quiet_NaN();
        index_t shallow_params = 0;
        std::int64_t shallow_steps = 0, shallow_fewer = 0;
        auto evaluate_shallow = [&](Model<B>& shallow) {
            shallow.eval();
            translator<B> st(shallow, tok);
            shallow_bleu = st.bleu(analysis_set, metric_search);
            shallow_params = shallow.parameter_count();
            std::printf("shallow comparison: BLEU %.2f on the analysis sentences\n", shallow_bleu);
        };
        if (!o.shallow_checkpoint.empty()) {
            const io::safetensors_file f(o.shallow_checkpoint);
            const auto sc = io::load_config<nn::seq2seq_config>(f.metadata(), "config.");
            DEPTHLAB_CHECK(sc.decoder_layers < cfg.decoder_layers && sc.encoder_layers == cfg.encoder_layers && sc.layer.dim == cfg.layer.dim &&
                               sc.src_vocab == cfg.src_vocab,
                           usage_error, "--shallow-checkpoint ", o.shallow_checkpoint, ": expected the same model with fewer decoder layers, got ",
                           describe(sc), " against ", describe(cfg));
            Model<B> shallow(sc, o.seed);
            const auto st = io::load_checkpoint(o.shallow_checkpoint, shallow);
            shallow_steps = static_cast<std::int64_t>(st.get_u64("step"));
            shallow_fewer = cfg.decoder_layers - sc.decoder_layers;
            std::printf("shallow comparison: %s from %s, %lld parameters, %lld steps%s\n", describe(sc).c_str(), o.shallow_checkpoint.c_str(),
                        static_cast<long long>(shallow.parameter_count()), static_cast<long long>(shallow_steps),
                        shallow_steps != step ? " (NOT the main model's step count)" : "");
            evaluate_shallow(shallow);
        } else if (o.compare_shallow > 0) {
            DEPTHLAB_CHECK(o.compare_shallow < cfg.decoder_layers, usage_error, "--compare-shallow ", o.compare_shallow, " >= decoder layers ",
                           cfg.decoder_layers);
            nn::seq2seq_config sc = cfg;
            sc.decoder_layers = cfg.decoder_layers - static_cast<int>(o.compare_shallow);
            Model<B> shallow(sc, o.seed);
            optim::Adam<float, B> sa(shallow.named_parameters(), adam_options(o.lr));
            data::translation_stream batches(batcher, o.seed + 1);
            train::Trainer<float, B> shallow_trainer(shallow, sa, {.steps = step, .clip = o.clip, .log_every = o.log_every});
            shallow_trainer.schedule = [&](std::int64_t done) { return schedule.lr(done + 1); };
            std::printf("shallow comparison: %s, %lld parameters, %lld steps\n", describe(sc).c_str(),
                        static_cast<long long>(shallow.parameter_count()), static_cast<long long>(step));
            shallow_trainer.fit([&] { return translation_loss(shallow, batches, o.label_smoothing); });
            shallow_steps = step;
            shallow_fewer = o.compare_shallow;
            evaluate_shallow(shallow);
        }
        const double s_analyses = seconds_since(t_an);

        summary["contribution_seconds"] = s_contrib;
        summary["criticality_seconds"] = s_crit;
        summary["criticality_search"] = o.search;
        summary["pruning_seconds"] = s_prune;
        summary["rewinding_seconds"] = s_rewind;
        summary["analyses_seconds"] = s_analyses;
        summary["metric_calls"] = metric_calls;
        summary["metric_seconds"] = metric_seconds;
        summary["encoder_runs"] = trans.encoder_runs();
        summary["encoder_reuses"] = trans.encoder_reuses();
        summary["spearman"] = std::isnan(rho) ? nlohmann::json(nullptr) : nlohmann::json(rho);
        summary["total_seconds"] = seconds_since(t_start);
        if (shallow_fewer > 0) {
            summary["shallow_bleu"] = shallow_bleu;
            summary["shallow_parameters"] = shallow_params;
            summary["shallow_steps"] = shallow_steps;
            summary["shallow_fewer_decoder_layers"] = shallow_fewer;
        }

        // ---- report
        std::vector<std::pair<std::int64_t, double>> loss_curve, dev_curve;
        double tokens_per_s = 0, train_elapsed = 0;
        if (std::ifstream mf(metrics_path); mf.good()) {
            for (std::string line; std::getline(mf, line);) {
                const auto j = nlohmann::json::parse(line, nullptr, false);
                if (j.is_discarded() || !j.contains("step")) continue;
                const auto s = j["step"].get<std::int64_t>();
                if (j.contains("loss") && j["loss"].is_number()) {
                    loss_curve.emplace_back(s, j["loss"].get<double>());
                    if (j.contains("tokens_per_s") && j["tokens_per_s"].is_number()) tokens_per_s = j["tokens_per_s"].get<double>();
                    if (j.contains("elapsed_s") && j["elapsed_s"].is_number()) train_elapsed = j["elapsed_s"].get<double>();
                }
                if (j.contains("dev_bleu") && j["dev_bleu"].is_number()) dev_curve.emplace_back(s, j["dev_bleu"].get<double>());
            }
        }
        summary["train_tokens_per_s"] = tokens_per_s;
        if (!dev_curve.empty()) summary["final_dev_bleu"] = dev_curve.back().second;
        write_summary();

        const int L = std::max(cfg.encoder_layers, cfg.decoder_layers);
        std::vector<std::string> layer_labels;
        for (int l = 1; l <= L; ++l) layer_labels.push_back(std::to_string(l));
        const double nan = std::numeric_limits<double>::quiet_NaN();
        auto grid_of = [&](const std::map<std::string, double>& by_module) {
            std::vector<std::vector<double>> g(kTypes.size(), std::vector<double>(static_cast<std::size_t>(L), nan));
            for (const auto& m : modules) {
                const auto ti = static_cast<std::size_t>(std::find(kTypes.begin(), kTypes.end(), m.type) - kTypes.begin());
                if (ti < kTypes.size() && m.layer >= 0 && m.layer < L) g[ti][static_cast<std::size_t>(m.layer)] = by_module.at(m.name);
            }
            return g;
        };
        score_view cview{"contribution", {}, {}}, kview{"criticality", {}, {}};
        for (const auto& e : contrib.modules) {
            cview.by_module[e.name] = e.score;
            cview.where[e.name] = {e.type, e.layer};
        }
        for (const auto& e : crit.modules) {
            kview.by_module[e.name] = e.alpha;
            kview.where[e.name] = {e.type, e.layer};
        }

        report::html_page page("The value of Transformer components: English→German (Ding)",
                               "Wang & Tu (COLING 2020) reproduced with depthlab · " + describe(cfg));
        if (base < 10)
            page.note("Baseline BLEU " + fixed(base) + " on the analysis sentences (test BLEU " + fixed(test_bleu_beam) +
                      "): a weak baseline. Every score below is a drop of at most C = BLEU/10 = " + fixed(contrib.clip, 3) +
                      " BLEU, close to the noise of " + std::to_string(analysis_set.size()) +
                      " sentences; read the heat maps as indicative, not as a replication.");
        page.section("Baseline");
        page.key_values({{"model", describe(cfg)},
                         {"parameters", std::to_string(model.parameter_count())},
                         {"training", !o.checkpoint.empty()
                                          ? std::to_string(step) + " steps in " + train::format_duration(train_elapsed) + " (loaded from " + o.checkpoint + ")"
                                          : std::to_string(step) + " steps in " + train::format_duration(trained.seconds) +
                                                (trained.stopped_by_time ? " (stopped by the time limit)" : "")},
                         {"training speed", fixed(tokens_per_s, 0) + " target tokens/s, " + std::to_string(max_threads()) + " thread(s)"},
                         {"batch", std::to_string(o.max_tokens) + " padded tokens; Adam (0.9, 0.98), lr " + fixed(o.lr, 4) +
                                       ", inverse-sqrt warm-up " + std::to_string(o.warmup) + "; label smoothing " + fixed(o.label_smoothing, 2)},
                         {"test BLEU, greedy", fixed(test_bleu_greedy) + " (" + std::to_string(test_set.size()) + " sentences)"},
                         {"test BLEU, beam " + std::to_string(o.beam), fixed(test_bleu_beam) + " (GNMT length penalty α " + fixed(o.alpha, 1) + ")"},
                         {"test chrF", fixed(test_chrf)},
                         {"analysis metric", "BLEU of " + std::string(o.analysis_beam > 1 ? "beam " + std::to_string(o.analysis_beam) : "greedy") +
                                                 " decoding on the first " + std::to_string(analysis_set.size()) + " test sentences: " + fixed(base)}},
                        "Model and baseline (sacreBLEU-style corpus BLEU, 13a tokenisation, on detokenised output)");
        if (!loss_curve.empty()) {
            report::line_series ls{"training loss (label-smoothed)", {}, {}};
            for (const auto& [s, l] : loss_curve) {
                ls.x.push_back(static_cast<double>(s));
                ls.y.push_back(l);
            }
            page.figure(report::line_chart({ls}, {.title = "Training loss", .x_label = "step", .y_label = "loss", .markers = false}),
                        "Label-smoothed cross-entropy per target token, averaged over each logging interval.");
        }
        if (!dev_curve.empty()) {
            report::line_series ds{"dev BLEU (greedy)", {}, {}};
            for (const auto& [s, b] : dev_curve) {
                ds.x.push_back(static_cast<double>(s));
                ds.y.push_back(b);
            }
            page.figure(report::line_chart({ds}, {.title = "Dev BLEU during training",
                                                  .subtitle = std::to_string(dev_set.size()) + " dev sentences, greedy decoding",
                                                  .x_label = "step",
                                                  .y_label = "BLEU",
                                                  .y_min = 0.0}),
                        "Dev BLEU over training.");
        }

        page.section("Contribution scores");
        page.paragraph("Module n is removed (its residual branch outputs zero; the sub-layer's LayerNorm still normalises the residual path, "
                       "y = LN(x), since the model is post-LN) and the analysis metric is measured again: d_n = clip(BLEU_base − BLEU_without_n, 0, C), "
                       "C = BLEU_base / 10 = " + fixed(contrib.clip, 3) + ", score = d_n / max_m d_m.");
        page.figure(report::heat_map(kTypes, layer_labels, grid_of(cview.by_module),
                                     {.title = "Contribution score (darker = more important)",
                                      .subtitle = "one module removed at a time · BLEU drop, clipped at BLEU/10, normalised",
                                      .x_label = "layer",
                                      .y_label = "module",
                                      .value_label = "contribution"}),
                    "Contribution score per module type and layer.");
        {
            std::map<std::string, double> raw;
            double mx = 0;
            for (const auto& e : contrib.modules) {
                raw[e.name] = contrib.base - e.metric_without;
                mx = std::max(mx, raw[e.name]);
            }
            page.figure(report::heat_map(kTypes, layer_labels, grid_of(raw),
                                         {.title = "Unclipped BLEU drop when the module is removed",
                                          .subtitle = "base − BLEU without the module (the contribution score clips this at C = " + fixed(contrib.clip, 2) + ")",
                                          .x_label = "layer",
                                          .y_label = "module",
                                          .value_label = "BLEU drop",
                                          .lo = 0.0,
                                          .hi = std::max(mx, 1e-9),
                                          .value_decimals = 1}),
                        "The raw drop behind the contribution score: where the clip saturates, this still orders the modules "
                        "(pruning and rewinding break ties of the score with it).");
        }
        {
            std::vector<std::vector<std::string>> rows;
            for (const auto& e : contrib.modules)
                rows.push_back({e.name, e.type, std::to_string(e.layer + 1), fixed(e.metric_without), fixed(e.drop, 3), fixed(e.score, 3)});
            page.table({"module", "type", "layer", "BLEU without", "drop d_n", "score"}, rows,
                       {.caption = "Contribution (baseline " + fixed(contrib.base) + ")"});
        }

        page.section("Criticality scores");
        page.paragraph("Module n alone is moved back towards its initial weights, θ_n(α) = (1 − α)θ_n⁰ + αθ_nᶠ; the criticality is the smallest α "
                       "whose BLEU stays within ε = " + fixed(o.epsilon, 2) + " of the baseline (search: " + o.search +
                       (o.search == "grid" ? ", α ∈ {0, 1/" + std::to_string(o.grid_steps) + ", …, 1}, first passing α"
                                           : ", tolerance " + fixed(o.tolerance, 3) + ", assumes BLEU monotone in α") +
                       "). The LayerNorm of the sub-layer moves with it. Every α tried is in criticality_trace.csv.");
        page.figure(report::heat_map(kTypes, layer_labels, grid_of(kview.by_module),
                                     {.title = "Criticality score α (darker = more important)",
                                      .subtitle = "smallest α with BLEU ≥ baseline − " + fixed(o.epsilon, 2) + " · " + o.search,
                                      .x_label = "layer",
                                      .y_label = "module",
                                      .value_label = "criticality α"}),
                    "Criticality per module type and layer.");
        {
            std::vector<std::vector<std::string>> rows;
            for (const auto& e : crit.modules)
                rows.push_back({e.name, e.type, std::to_string(e.layer + 1), fixed(e.alpha, 3), fixed(e.metric_at_alpha),
                                std::to_string(e.trace.size()), e.found ? "" : "none passed"});
            page.table({"module", "type", "layer", "α", "BLEU at α", "evaluations", "note"}, rows,
                       {.caption = "Criticality (" + o.search + ", ε = " + fixed(o.epsilon, 2) + ")"});
        }
        {
            std::vector<report::scatter_series> sc(2);
            sc[0].name = "encoder";
            sc[1].name = "decoder";
            const auto rc = analysis::average_ranks(contrib.scores());
            const auto rk = analysis::average_ranks(crit.scores());
            for (std::size_t i = 0; i < modules.size(); ++i)
                sc[modules[i].type[0] == 'E' ? 0 : 1].points.push_back({rc[i], rk[i], modules[i].type + std::to_string(modules[i].layer + 1)});
            page.figure(report::scatter(sc, {.title = "Contribution rank vs criticality rank",
                                             .subtitle = "Spearman ρ = " + (std::isnan(rho) ? std::string("n/a") : fixed(rho, 3)),
                                             .x_label = "contribution rank (1 = least important)",
                                             .y_label = "criticality rank",
                                             .diagonal = true}),
                        "Rank agreement of the two scores (average ranks for ties); the dashed line is y = x.");
        }

        page.section("Findings next to the paper's");
        page.paragraph("Wang & Tu (2020) trained Transformer-base on WMT14 En–De and found, with both scores: the decoder self-attention "
                       "(D:SA) modules are the least important and the decoder feed-forward (D:FF) modules the most; modules in lower encoder "
                       "layers and in upper decoder layers matter more than the others; upper decoder–encoder attention (D:EA) modules matter "
                       "more than lower ones; less dropout and more training data leave fewer unimportant modules. Removing the 3–4 least "
                       "important modules costs little BLEU, and rewinding them to their initial weights and fine-tuning the whole model "
                       "gives a model slightly better than the original. The table checks each claim on this run (mean score per group; "
                       "'lower' and 'upper' are the bottom and top half of the layers).");
        {
            std::vector<std::vector<std::string>> rows;
            for (const auto* v : {&cview, &kview})
                for (const auto& f : check_findings(*v, cfg.encoder_layers, cfg.decoder_layers))
                    rows.push_back({v->name, f.claim, f.ours, f.holds ? "yes" : "no"});
            page.table({"score", "paper's finding", "this run", "holds?"}, rows, {.caption = "The paper's findings, checked on this run"});
        }

        page.section("Pruning");
        {
            report::line_series pc{"by contribution", {}, {}}, pk{"by criticality", {}, {}};
            for (const auto& p : prune_c.curve) {
                pc.x.push_back(p.k);
                pc.y.push_back(p.metric);
            }
            for (const auto& p : prune_k.curve) {
                pk.x.push_back(p.k);
                pk.y.push_back(p.metric);
            }
            page.figure(report::line_chart({pc, pk}, {.title = "BLEU after removing the k least important modules",
                                                      .subtitle = std::to_string(analysis_set.size()) + " test sentences",
                                                      .x_label = "modules removed k",
                                                      .y_label = "BLEU",
                                                      .y_min = 0.0,
                                                      .integer_x = true}),
                        "Pruning curves: the k least important modules (by each score; ties broken by the unclipped BLEU drop) switched off together.");
            std::vector<std::vector<std::string>> rows;
            for (std::size_t i = 0; i < prune_c.curve.size(); ++i) {
                const auto& a = prune_c.curve[i];
                const auto& b = prune_k.curve[i];
                rows.push_back({std::to_string(a.k), a.modules_removed.empty() ? "" : a.modules_removed.back(),
                                fixed(100.0 * static_cast<double>(a.parameters_removed) / static_cast<double>(prune_c.total_parameters), 1),
                                fixed(a.metric), b.modules_removed.empty() ? "" : b.modules_removed.back(), fixed(b.metric)});
            }
            page.table({"k", "k-th removed (contribution)", "% parameters removed", "BLEU", "k-th removed (criticality)", "BLEU"}, rows,
                       {.caption = "Pruning (" + std::to_string(prune_c.total_parameters) + " parameters in all)"});
            if (shallow_fewer > 0)
                page.paragraph("A model with " + std::to_string(shallow_fewer) + " fewer decoder layers (" + std::to_string(shallow_params) +
                               " parameters), trained with the same recipe for " + std::to_string(shallow_steps) + " steps (the full model: " +
                               std::to_string(step) + "): BLEU " + fixed(shallow_bleu) + " on the analysis sentences.");
        }

        page.section("Rewinding");
        page.paragraph("The k least important modules (by " + o.rank_by + ") are reset to θ⁰, then the whole model is fine-tuned for " +
                       std::to_string(o.rewind_steps) + " steps (fresh Adam, lr " + sci(ft_lr) +
                       " after a short warm-up; same batches as training). k = 0 is the control: the same fine-tuning without rewinding.");
        {
            std::vector<std::vector<std::string>> rows;
            for (const auto& p : rewound) {
                std::string mods;
                for (const auto& m : p.modules) mods += (mods.empty() ? "" : ", ") + m;
                rows.push_back({std::to_string(p.k), mods.empty() ? "(none)" : mods, fixed(p.metric_before_finetune), fixed(p.metric_after_finetune),
                                fixed(p.metric_after_finetune - base)});
            }
            page.table({"k", "modules rewound", "BLEU after rewinding", "BLEU after fine-tuning", "vs baseline"}, rows,
                       {.caption = "Rewinding + fine-tuning (baseline " + fixed(base) + ")"});
        }

        page.section("Run details");
        page.key_values({{"time: training", train::format_duration(o.checkpoint.empty() ? trained.seconds : train_elapsed)},
                         {"time: baseline BLEU", train::format_duration(t_greedy + t_beam)},
                         {"time: contribution", train::format_duration(s_contrib)},
                         {"time: criticality", train::format_duration(s_crit)},
                         {"time: pruning", train::format_duration(s_prune)},
                         {"time: rewinding", train::format_duration(s_rewind)},
                         {"metric evaluations", std::to_string(metric_calls) + ", " + fixed(metric_seconds / std::max<std::size_t>(metric_calls, 1), 2) +
                                                    " s each on average"},
                         {"encoder outputs reused", std::to_string(trans.encoder_reuses()) + " of " +
                                                        std::to_string(trans.encoder_reuses() + trans.encoder_runs()) + " translations"},
                         {"total", train::format_duration(seconds_since(t_start))}},
                        "Where the time went");
        page.preformatted(command_line);
        page.provenance("examples/component_value, git " + git_commit());
        page.write(o.out + "/report.html");
        std::printf("wrote %s/{contribution,criticality,criticality_trace,pruning,pruning_criticality,rewinding}.csv, summary.json, report.html in %s\n",
                    o.out.c_str(), train::format_duration(seconds_since(t_start)).c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "component_value: %s\n", e.what());
        return 1;
    }
}

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines interleave with stderr in logs
    options o;
    examples::cli args("component_value",
                       "Wang & Tu (2020) on English->German (Ding pairs): train or load an encoder-decoder Transformer, then\n"
                       "contribution, criticality, pruning and rewinding with test BLEU as the metric; writes CSVs and report.html.\n"
                       "Presets: tiny = 2+2 layers, d 128, FF 512 (smoke runs); small = 3+3, d 256, 4 heads, FF 1024 (trains on\n"
                       "2 cores); base = the paper's 6+6, d 512, 8 heads, FF 2048 (too slow for 2 cores). All: dropout 0.1, post-LN,\n"
                       "ReLU, joint vocabulary with shared embeddings tied to the output.");
    args.option("preset", o.preset, "model size: tiny | small | base").one_of({"tiny", "small", "base"})
        .option("enc-layers", o.enc_layers, "encoder layers (0: the preset's)").range<std::int64_t>(0, 256)
        .option("dec-layers", o.dec_layers, "decoder layers (0: the preset's)").range<std::int64_t>(0, 256)
        .option("dim", o.dim, "model width (0: the preset's)").range<std::int64_t>(0, 1 << 16)
        .option("heads", o.heads, "attention heads (0: the preset's)").range<std::int64_t>(0, 1024)
        .option("ff", o.ff, "feed-forward width (0: the preset's)").range<std::int64_t>(0, 1 << 18)
        .option("dropout", o.dropout, "dropout (< 0: the preset's)").range(-1.0, 0.99)
        .option("steps", o.steps, "optimiser steps").range<std::int64_t>(0, 1000000000)
        .option("max-train-minutes", o.max_train_minutes, "stop training after this many minutes (0: no limit)").range(0.0, 1e7)
        .option("max-tokens", o.max_tokens, "padded tokens per batch: sentences x max(src, tgt) length").range<std::int64_t>(1, 1 << 24)
        .option("lr", o.lr, "peak learning rate").positive()
        .option("warmup", o.warmup, "warm-up steps of the inverse-square-root schedule").range<std::int64_t>(1, 1000000000)
        .option("clip", o.clip, "gradient clipping by global norm (0: off)").range(0.0, 1e6)
        .option("label-smoothing", o.label_smoothing, "label smoothing").range(0.0, 0.99)
        .option("seed", o.seed, "random seed (model init, data order, dropout)")
        .option("data", o.data, "directory with {train,dev,test}.{en,de} and spm.model (scripts/fetch-data translation)")
        .flag("with-mt", o.with_mt, "add the machine-translated nlp-corpus pairs (mt.{en,de}) to the training data")
        .option("ding-repeat", o.ding_repeat, "with --with-mt: repeat the in-domain Ding pairs this many times per epoch").range<std::int64_t>(1, 1000)
        .option("out", o.out, "output directory")
        .option("checkpoint", o.checkpoint, "load this checkpoint (with its θ⁰ and training recipe) instead of training")
        .flag("resume", o.resume, "continue training from <out>/checkpoint.safetensors up to --steps")
        .option("log-every", o.log_every, "steps between progress lines").range<std::int64_t>(1, 1000000000)
        .option("save-every", o.save_every, "steps between checkpoints").range<std::int64_t>(1, 1000000000)
        .option("dev-every", o.dev_every, "steps between dev BLEU evaluations (0: only at the end)").range<std::int64_t>(0, 1000000000)
        .option("dev-sentences", o.dev_sentences, "dev sentences for the dev BLEU (greedy)").range<std::int64_t>(1, 1 << 24)
        .option("beam", o.beam, "beam size for the baseline test BLEU (1: greedy)").range<std::int64_t>(1, 256)
        .option("alpha", o.alpha, "GNMT length penalty exponent ((5+len)/6)^alpha for beam search").range(0.0, 10.0)
        .option("eval-sentences", o.eval_sentences, "test sentences for the analysis metric (BLEU)").range<std::int64_t>(1, 1 << 24)
        .option("analysis-beam", o.analysis_beam, "beam size of the analysis metric (1: greedy)").range<std::int64_t>(1, 256)
        .option("decode-batch", o.decode_batch, "rows decoded together (sentences x beam)").range<std::int64_t>(1, 1 << 20)
        .flag("skip-analyses", o.skip_analyses, "stop after training and the baseline BLEU")
        .option("search", o.search, "criticality search: grid | bisection").one_of({"grid", "bisection"})
        .option("grid-steps", o.grid_steps, "criticality grid: alpha in {0, 1/k, ..., 1}").range<std::int64_t>(1, 10000)
        .option("tolerance", o.tolerance, "criticality bisection: bracket width to stop at").range(1e-6, 1.0)
        .option("max-evaluations", o.max_evaluations, "criticality bisection: evaluations per module").range<std::int64_t>(1, 10000)
        .option("epsilon", o.epsilon, "criticality: BLEU within epsilon of the baseline passes").range(0.0, 100.0)
        .option("prune-max-k", o.prune_max_k, "pruning curve up to this many modules removed").range<std::int64_t>(0, 100000)
        .option("rank-by", o.rank_by, "ranking for rewinding: contribution | criticality").one_of({"contribution", "criticality"})
        .option("rewind-k", o.rewind_k, "comma-separated k for rewinding (0 = fine-tune only, the control)")
        .option("rewind-steps", o.rewind_steps, "fine-tuning steps after rewinding").range<std::int64_t>(0, 1000000000)
        .option("rewind-lr", o.rewind_lr, "fine-tuning learning rate (0: the training schedule's last)").range(0.0, 10.0)
        .option("compare-shallow", o.compare_shallow, "> 0: also train a model with this many fewer decoder layers (same recipe)").range<std::int64_t>(0, 256)
        .option("device", o.device, examples::device_help).one_of({"cpu", "cuda", "host_device"})
        .option("shallow-checkpoint", o.shallow_checkpoint,
                "compare with this shallower model instead (trained separately with --dec-layers, same recipe)");
    args.parse(argc, argv);
    std::string command_line;
    for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
    return examples::on_device(o.device, "component_value", [&](auto tag) { return run<decltype(tag)>(o, command_line); });
}
