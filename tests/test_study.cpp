// What the examples used to hold and the library now does: nn::translator, its encoder
// cache and its BLEU/chrF scoring, translation sets, translation data folders (meta.json, repeats, a second corpus),
// analysis/study.hpp (ranking with ties, unclipped drops, grids, the paper's findings with
// tied verdicts, the timed metric), io::csv_writer, train::metrics_log, snapshots from saved
// tensors, presets.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <depthlab/depthlab.hpp>

#include <doctest/doctest.h>

#include "temp_dir.hpp"

using namespace depthlab;
using doctest::Contains;

namespace {

void write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

/// Ids of a text: one id per character, 4 + (c % 8), so that a test needs no tokenizer.
std::vector<std::int64_t> char_ids(const std::string& s) {
    std::vector<std::int64_t> ids;
    for (unsigned char c : s) ids.push_back(4 + c % 8);
    return ids;
}

nn::seq2seq_config small_model(bool norm_first) {
    nn::seq2seq_config c{.src_vocab = 12, .tgt_vocab = 12, .share_embeddings = true, .encoder_layers = 1, .decoder_layers = 1, .max_len = 32};
    c.layer.dim = 16, c.layer.heads = 2, c.layer.ff_dim = 32, c.layer.dropout = c.layer.attention_dropout = 0, c.layer.norm_first = norm_first;
    return c;
}

}  // namespace

TEST_CASE("translation sets: sorted by source length, hypotheses back in the caller's order, long sources cut and counted") {
    const std::vector<std::vector<std::int64_t>> sources{{5, 6, 7, 8}, {5}, {5, 6, 7, 8, 9, 10}, {5, 6}};
    const auto set = nn::make_translation_set("t", sources, {"a", "b", "c", "d"}, {.batch_sentences = 3, .max_source_tokens = 5});
    REQUIRE(set.batches.size() == 2);
    CHECK(set.members[0] == std::vector<std::size_t>{1, 3, 0});  // lengths 1, 2, 4
    CHECK(set.members[1] == std::vector<std::size_t>{2});
    CHECK(set.truncated == 1);
    CHECK(set.batches[1].length == 6);  // 5 tokens + EOS
    CHECK_THROWS_WITH_AS(nn::make_translation_set("t", sources, {"a"}), Contains("make_translation_set(t): 4 sources but 1 references"), shape_error);

    for (const bool norm_first : {false, true}) {
        CAPTURE(norm_first);
        nn::Seq2SeqTransformer<double> model(small_model(norm_first), 3);  // double: no near-ties between batched and alone
        model.eval();
        const auto letters = [](std::span<const std::int64_t> ids) {
            std::string s;
            for (auto id : ids) s += static_cast<char>('a' + id);
            return s;
        };
        nn::translator<double> trans(model, letters);
        const auto first = trans.translate(set, {});
        // the hypotheses of each sentence equal those of the sentence decoded alone
        for (std::size_t i = 0; i < sources.size(); ++i) {
            const auto alone = nn::make_translation_set("one", std::span(sources).subspan(i, 1), {"x"}, {.max_source_tokens = 5});
            nn::translator<double> single(model, letters);
            CHECK(single.translate(alone, {})[0] == first[i]);
        }
        CHECK(trans.encoder_runs() == 1);
        CHECK(trans.translate(set, {}) == first);  // nothing changed: the encoder outputs are reused
        CHECK(trans.encoder_reuses() == 1);
        const train::translation_score sc = train::score(trans, set, {});  // translate() scored against the references
        CHECK(sc.hypotheses == first);
        CHECK(sc.bleu == metrics::corpus_bleu(first, set.references).score);
        CHECK(sc.chrf == metrics::corpus_chrf(first, set.references).score);
        CHECK(sc.seconds >= 0);
        // a decoder change keeps the cache; an encoder parameter (the final norm of a pre-LN
        // model included) or an ablated encoder sub-layer forces a new encoder run
        model.parameter("decoder.0.feed_forward.linear1.bias").value().fill_(0.5);
        (void)trans.translate(set, {});
        CHECK(trans.encoder_runs() == 1);
        const std::string enc_param = norm_first ? "encoder_norm.bias" : "encoder.0.feed_forward.linear1.bias";
        model.parameter(enc_param).value().fill_(0.25);
        (void)trans.translate(set, {});
        CHECK(trans.encoder_runs() == 2);
        for (auto& [name, r] : nn::sublayers(model))
            if (name == "encoder.0.self_attention") r->enabled = false;
        (void)trans.translate(set, {});
        CHECK(trans.encoder_runs() == 3);
        // a set made again (even at the same address) is another set: its sources are encoded
        const std::size_t runs = trans.encoder_runs();
        for (std::size_t i = 0; i < 2; ++i) {
            const auto again = nn::make_translation_set("loop", std::span(sources).subspan(i, 1), {"x"});
            (void)trans.translate(again, {});
        }
        CHECK(trans.encoder_runs() == runs + 2);
        CHECK_THROWS_WITH_AS(trans.translate(nn::translation_set{}, {}), Contains("was not made by make_translation_set"), usage_error);
        model.train();
        CHECK_THROWS_WITH_AS(trans.translate(set, {}), Contains("translator: the model is in training mode"), usage_error);
    }
}

TEST_CASE("translation data folders: meta.json names the pair, a second corpus and repeats, bad meta.json") {
    depthlab_test::temp_dir dir("study");
    for (const char* split : {"train", "dev", "test", "extra"}) {
        write_text(dir.file(std::string(split) + ".fr"), std::string(split) + " un\n" + split + " deux\n");
        write_text(dir.file(std::string(split) + ".en"), std::string(split) + " one\n" + split + " two\n");
    }
    CHECK(data::read_translation_meta(dir.str()).src == "en");  // no meta.json: en -> de
    write_text(dir.file("meta.json"), R"({"src": "fr", "tgt": "en", "source": "a test corpus"})");
    const auto info = data::read_translation_meta(dir.str());
    CHECK(info.src == "fr");
    CHECK(info.tgt == "en");
    CHECK(info.source == "a test corpus");
    const auto c = data::load_translation_corpus(dir.str(), char_ids, {.second_corpus = "extra", .main_repeat = 3, .dev_limit = 1});
    CHECK(c.train.src[0] == "train un");
    CHECK(c.dev.size() == 1);
    CHECK(c.train_pairs.size() == 2 * 3 + 2);
    CHECK(c.second_pairs == 2);
    CHECK(c.train_pairs[2].src == c.train_pairs[0].src);  // the main corpus again, in order
    CHECK(c.train_pairs[6].src == char_ids("extra un"));
    write_text(dir.file("meta.json"), R"({"src": "fr", "tgt": "fr"})");
    CHECK_THROWS_WITH_AS((void)data::read_translation_meta(dir.str()), Contains("src and tgt are both 'fr'"), io_error);
    write_text(dir.file("meta.json"), R"({"src": 3})");
    CHECK_THROWS_WITH_AS((void)data::read_translation_meta(dir.str()), Contains("'src' is not a non-empty string"), io_error);
    write_text(dir.file("meta.json"), "[1, 2");
    CHECK_THROWS_WITH_AS((void)data::read_translation_meta(dir.str()), Contains("meta.json is not a JSON object"), io_error);
    // a split without a sentence pair is refused before any training, naming its files
    write_text(dir.file("meta.json"), R"({"src": "fr", "tgt": "en"})");
    write_text(dir.file("test.fr"), "");
    write_text(dir.file("test.en"), "");
    const std::string both_empty = "test.fr and " + dir.str() + "/test.en are empty";
    CHECK_THROWS_WITH_AS((void)data::load_translation_corpus(dir.str(), char_ids), Contains(both_empty.c_str()), io_error);
    write_text(dir.file("test.fr"), "\n \n");
    write_text(dir.file("test.en"), "one\n\t\n");
    CHECK_THROWS_WITH_AS((void)data::load_translation_corpus(dir.str(), char_ids), Contains("hold no pair with text on both sides (2 blank)"),
                         io_error);
    write_text(dir.file("test.fr"), "un\n \n");  // one usable pair is enough
    CHECK(data::load_translation_corpus(dir.str(), char_ids).test.size() == 2);
}

TEST_CASE("study: ranking with ties, unclipped drops, type x layer grids") {
    CHECK(analysis::rank_with_ties({1, 1, 0, 1}, {0.5, 0.2, 9, 0.2}) == std::vector<double>{3, 1, 0, 2});
    CHECK_THROWS_AS(analysis::rank_with_ties({1, 2}, {1}), shape_error);
    CHECK_THROWS_AS(analysis::rank_with_ties({1, std::nan("")}, {0, 0}), numeric_error);

    analysis::contribution_result c;
    c.base = 30;
    c.modules = {{"encoder.0.self_attention", "E:SA", 0, 20, 3, 1.0}, {"decoder.0.feed_forward", "D:FF", 0, 29, 1, 1.0 / 3},
                 {"decoder.1.feed_forward", "D:FF", 1, 35, 0, 0}};
    CHECK(analysis::unclipped_drops(c) == std::vector<double>{10, 1, -5});
    analysis::criticality_result k;
    k.base = 30;
    k.modules = {{"a", "E:SA", 0, 1, 30, "grid", true, {{0, 12}, {0.5, 25}, {1, 30}}}, {"b", "D:FF", 0, 0.5, 30, "bisection", true, {{1, 30}, {0.5, 30}}}};
    CHECK(analysis::drops_at_initial(k) == std::vector<double>{18, 0});  // b never tried α = 0

    const auto g = analysis::by_type_and_layer(analysis::values_of(c));
    CHECK(g.layers == std::vector<std::string>{"0", "1"});  // layers count from 0, as in the CSVs
    CHECK(g.values[0][0] == 1.0);                      // E:SA, layer 0
    CHECK(g.values[4][1] == 0.0);                      // D:FF, layer 1
    CHECK(std::isnan(g.values[2][0]));                 // D:SA: no module
    CHECK(g.max() == 1.0);
    CHECK(analysis::group_mean(analysis::values_of(c), [](const std::string& t, int) { return t == "D:FF"; }) == doctest::Approx(1.0 / 6));
}

TEST_CASE("study: the paper's findings say 'tied' when the compared means are equal") {
    analysis::module_values v{"contribution", {}};
    // every score saturated at 1.00 except one: the order of the types is arbitrary
    for (const char* t : {"E:SA", "E:FF"})
        for (int l = 0; l < 2; ++l) v.entries.push_back({std::string(t) + std::to_string(l), t, l, 1.0});
    for (const char* t : {"D:SA", "D:EA", "D:FF"})
        for (int l = 0; l < 2; ++l) v.entries.push_back({std::string(t) + std::to_string(l), t, l, 1.0});
    v.entries[4].value = 0.5;  // D:SA layer 0: D:SA is the lowest type, alone
    const auto f = analysis::wang_tu_findings(v, 2, 2);
    REQUIRE(f.size() == 5);
    CHECK(f[0].result == analysis::verdict::holds);  // D:SA least important
    CHECK(f[0].ours.find("D:SA 0.75 < ") == 0);
    CHECK(f[1].result == analysis::verdict::tied);   // D:FF shares the highest mean with 3 others
    CHECK(f[1].ours == "highest: D:FF 1.00 = D:EA 1.00 = E:FF 1.00 = E:SA 1.00");
    CHECK(f[2].result == analysis::verdict::tied);   // encoder bottom 1.00 vs top 1.00
    CHECK(f[3].result == analysis::verdict::holds);  // decoder: top (1.00) > bottom (0.83)
    CHECK(f[4].result == analysis::verdict::tied);   // D:EA 1.00 vs 1.00
    CHECK(f[4].ours == "bottom 1: 1.00 vs top 1: 1.00");
    CHECK(std::string(analysis::to_string(analysis::verdict::tied)) == "tied");
    v.entries[4].value = 1.0;
    CHECK(analysis::wang_tu_findings(v, 2, 2)[0].result == analysis::verdict::tied);
    CHECK(analysis::wang_tu_findings(v, 2, 2)[0].ours.find(" = ") != std::string::npos);
}

TEST_CASE("study: the paper's pruning and rewinding findings, with the numbers behind each verdict") {
    analysis::pruning_result by_c, by_k;
    for (int k = 0; k <= 3; ++k) {
        by_c.curve.push_back({.k = k, .modules_removed = {}, .parameters_removed = 0, .metric = 30.0 - 0.1 * k});  // 3 modules cost 0.3: holds
        by_k.curve.push_back({.k = k, .modules_removed = {}, .parameters_removed = 0, .metric = 30.0 - 0.3 * k});  // cost 0.9: fails
    }
    const std::vector<analysis::rewinding_point> rewinding{{.k = 0, .modules = {}, .metric_before_finetune = 0, .metric_after_finetune = 30.5},
                                                           {.k = 2, .modules = {}, .metric_before_finetune = 0, .metric_after_finetune = 30.0},
                                                           {.k = 3, .modules = {}, .metric_before_finetune = 0, .metric_after_finetune = 29.0}};
    const analysis::smaller_model shallow{.metric = 29.5, .modules_fewer = 3, .what = "1 fewer decoder layer"};
    const auto f = analysis::pruning_findings(by_c, by_k, rewinding, 30.0, "BLEU", &shallow);
    REQUIRE(f.size() == 4);
    CHECK(f[0].result == analysis::verdict::holds);
    CHECK(f[0].ours == "30.00 -> 29.70 (cost 0.30)");
    CHECK(f[1].result == analysis::verdict::fails);
    CHECK(f[2].result == analysis::verdict::holds);  // pruned 29.7 (by contribution) > 29.5
    CHECK_MESSAGE(f[2].ours.find("smaller model: 29.50") != std::string::npos, f[2].ours);
    CHECK(f[3].result == analysis::verdict::fails);  // k = 3 ends at 29.0 < 30.0 (k = 0, the control, is not a rewinding)
    CHECK(f[3].ours == "k = 2: 30.00, k = 3: 29.00 against the baseline 30.00");
    // without the numbers: n/a, saying what is missing
    const auto none = analysis::pruning_findings({}, {}, {}, 30.0, "BLEU");
    REQUIRE(none.size() == 4);
    for (const auto& x : none) CHECK(x.result == analysis::verdict::no_data);
    CHECK(none[2].ours.find("--shallow-checkpoint") != std::string::npos);
}

TEST_CASE("study: a timed metric counts its calls through every copy") {
    int calls = 0;
    const analysis::timed_metric m([&] { return static_cast<double>(++calls); });
    const analysis::metric_fn as_fn = m;  // a copy, as the analyses take it
    CHECK(as_fn() == 1.0);
    CHECK(m() == 2.0);
    CHECK(m.calls() == 2);
    CHECK(m.seconds() >= 0);
    analysis::stopwatch w;
    (void)w.lap("a");
    (void)w.lap();
    REQUIRE(w.phases().size() == 1);
    CHECK(w.phases()[0].first == "a");
    CHECK(w.elapsed() >= w.phases()[0].second);  // since construction, laps included
    CHECK_THROWS_AS(analysis::timed_metric(analysis::metric_fn{}), usage_error);
}

TEST_CASE("csv_writer: header, quoting, numbers that read back exactly, one field per column") {
    io::csv_writer csv({"name", "value", "n"});
    csv.row("plain", 0.1, 3).row("with, comma", std::numeric_limits<double>::quiet_NaN(), -1).row("say \"hi\"", 1e300, 0);
    CHECK(csv.str() == "name,value,n\nplain,0.1,3\n\"with, comma\",nan,-1\n\"say \"\"hi\"\"\",1e+300,0\n");
    CHECK(csv.rows() == 3);
    CHECK_THROWS_WITH_AS(csv.row("one", 2.0), Contains("csv_writer: a row of 2 fields for 3 columns (name, ...)"), usage_error);
    depthlab_test::temp_dir dir("study");
    csv.write(dir.file("t.csv"));
    std::ifstream in(dir.file("t.csv"), std::ios::binary);
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == csv.str());
    CHECK_THROWS_AS(csv.write(dir.file("no/such/dir/t.csv")), io_error);
}

TEST_CASE("metrics_log: series by key, torn lines skipped, a missing file is empty") {
    depthlab_test::temp_dir dir("study");
    write_text(dir.file("m.jsonl"), "{\"step\":1,\"loss\":2.5}\n{\"step\":2,\"loss\":2.0,\"dev_bleu\":3}\nnot json\n{\"step\":3,\"lo");
    const auto log = train::read_metrics_log(dir.file("m.jsonl"));
    CHECK(log.records.size() == 2);
    CHECK(log.series("loss") == std::vector<std::pair<std::int64_t, double>>{{1, 2.5}, {2, 2.0}});
    CHECK(log.last("dev_bleu") == 3.0);
    CHECK(log.last("absent", -1) == -1);
    CHECK(train::read_metrics_log(dir.file("none.jsonl")).records.empty());
}

TEST_CASE("snapshots from saved tensors; presets and descriptions") {
    nn::Seq2SeqTransformer<float> model(small_model(false), 1);
    const nn::Snapshot<float> s(model);
    const nn::Snapshot<float> copy(model, s.tensors());
    CHECK(copy.at("src_embed.weight").to_vector() == s.at("src_embed.weight").to_vector());
    auto missing = s.tensors();
    missing.pop_back();
    CHECK_THROWS_WITH_AS((nn::Snapshot<float>(model, missing)), Contains("Snapshot: no saved tensor for parameter"), io_error);
    auto wrong = s.tensors();
    wrong[0].second = Tensor<float>::zeros({1});
    CHECK_THROWS_WITH_AS((nn::Snapshot<float>(model, wrong)), Contains("has shape (1,)"), io_error);

    const auto base = nn::seq2seq_preset("base", 8000);
    CHECK(base.encoder_layers == 6);
    CHECK(nn::describe(nn::seq2seq_preset("small", 8000)) == "3+3 layers, d 256, 4 heads, FF 1024, dropout 0.1, vocab 8000 (joint, shared + tied)");
    CHECK_THROWS_WITH_AS(nn::seq2seq_preset("huge", 1), Contains("'huge' is not one of tiny, small, base"), usage_error);
    const auto sized = nn::seq2seq_preset("small", 8000, {.decoder_layers = 1, .heads = 8, .dropout = 0.0});
    CHECK(nn::describe(sized) == "3+1 layers, d 256, 8 heads, FF 1024, dropout 0, vocab 8000 (joint, shared + tied)");
    CHECK(sized.layer.attention_dropout == 0.0);
    CHECK(nn::describe(nn::seq2seq_preset("small", 8000, {})) == nn::describe(nn::seq2seq_preset("small", 8000)));
    const auto a = halting::act_albert_preset("small", 30000, 128);
    CHECK(a.act.max_iterations == 12);
    CHECK(a.model.depth == 12);
    CHECK(a.tau == 5e-4);
    CHECK(a.model.layer.dropout == 0.0);
    CHECK_THROWS_AS(halting::act_albert_preset("x", 1, 8), usage_error);
}

// The iso-FLOP tables' cost: a teacher-forced forward's products per target token; a removed
// decoder feed-forward runs none of its 2·n·D·F + 2·n·F·D (n the padded target positions).
TEST_CASE("teacher_forced_flops_per_token counts what ran: a removed feed-forward saves exactly its products") {
    nn::Seq2SeqTransformer<float> model(small_model(false), 1);
    model.eval();
    Generator g(2);
    const std::vector<data::seq2seq_batch> batches{data::reverse_task_batch(g, 3, 5, 12), data::reverse_task_batch(g, 2, 4, 12)};
    const std::int64_t tokens = batches[0].target_tokens() + batches[1].target_tokens();
    const std::int64_t positions = batches[0].tgt_in.batch * batches[0].tgt_in.length + batches[1].tgt_in.batch * batches[1].tgt_in.length;
    const double full = train::teacher_forced_flops_per_token(model, batches);
    const auto mods = analysis::default_modules(model);
    const auto ff = std::find_if(mods.begin(), mods.end(), [](const analysis::module_ref& m) { return m.name == "decoder.0.feed_forward"; });
    REQUIRE(ff != mods.end());
    double pruned = 0;
    {
        analysis::scoped_ablation off(*ff);
        pruned = train::teacher_forced_flops_per_token(model, batches);
    }
    CHECK((full - pruned) * static_cast<double>(tokens) == doctest::Approx(4.0 * static_cast<double>(positions) * 16 * 32).epsilon(1e-9));
    CHECK(train::teacher_forced_flops_per_token(model, batches) == full);
    CHECK_THROWS_WITH_AS(train::teacher_forced_flops_per_token(model, {}), Contains("without a target token"), usage_error);
}

TEST_CASE("translation recipe: saved and loaded by name; the shallower-model check; the study's report") {
    const train::translation_recipe r{.lr = 2e-3, .warmup = 77, .max_tokens = 512, .label_smoothing = 0.2, .clip = 0.5, .seed = 9};
    io::metadata_map meta;
    io::save_config(meta, "train.", r);
    CHECK(meta.at("train.warmup") == "77");
    const auto back = io::load_config<train::translation_recipe>(meta, "train.");
    CHECK(back.lr == r.lr);
    CHECK(back.warmup == 77);
    CHECK(back.max_tokens == 512);
    CHECK(back.label_smoothing == 0.2);
    CHECK(back.clip == 0.5);
    CHECK(back.seed == 9);
    const auto adam = train::translation_adam(1e-3);
    CHECK(adam.beta2 == 0.98);
    CHECK(adam.eps == 1e-9);

    // a checkpoint of the same model (not shallower) is refused, naming both
    depthlab_test::temp_dir dir("shallow");
    nn::Seq2SeqTransformer<float> model(small_model(false), 1);
    const std::string path = (dir.path / "same.safetensors").string();
    io::training_state<float> st;
    io::save_config(st.metadata, "config.", small_model(false));
    st.set_u64("step", 3);
    io::save_checkpoint(path, model, st);
    const std::vector<std::vector<std::int64_t>> sources{char_ids("ab")};
    const nn::translation_set set = nn::make_translation_set("t", sources, {"ab"});
    CHECK_THROWS_WITH_AS((train::compare_shallow_checkpoint<float, backend::cpu>(path, small_model(false), set, [](std::span<const std::int64_t>) {
                             return std::string("x");
                         }, {}, 1, {})),
                         Contains("expected the same model with fewer decoder layers, got 1+1 layers"), usage_error);

    // the report: baseline rows from the run's facts; without a study, no analysis sections
    const report::html_page page = report::translation_study_report(
        {.src = "en", .tgt = "de", .corpus = "Ding", .model = "1+1 layers", .parameters = 1234, .steps = 50, .train_seconds = 61,
         .recipe = r, .test_sentences = 7, .greedy_bleu = 12.5, .beam_bleu = 13.25, .chrf = 40, .beam = 4, .analysis_bleu = 11},
        train::metrics_log{}, nullptr);
    const std::string html = page.html();
    CHECK(html.find("The value of Transformer components: en→de (Ding)") != std::string::npos);
    CHECK(html.find("50 steps in") != std::string::npos);
    CHECK(html.find("512 padded tokens; Adam (0.9, 0.98), lr 0.0020, inverse-sqrt warm-up 77; label smoothing 0.20") != std::string::npos);
    CHECK(html.find("13.25 (GNMT length penalty") != std::string::npos);
    CHECK(html.find("Contribution") == std::string::npos);

    // the heads' section: a heat map per score, a row per attention sub-layer, a cell per head
    const report::head_scores heads{.sublayer = {"encoder.0.self_attention", "encoder.0.self_attention", "decoder.0.cross_attention",
                                                 "decoder.0.cross_attention"},
                                    .head = {0, 1, 0, 1},
                                    .scores = {{"contribution", {0.25, 1.0, 0.0, 0.5}}, {"importance", {3.0, 7.5, 0.5, 2.0}}}};
    report::html_page with_heads("heads");
    report::heads_section(with_heads, heads);
    const std::string hh = with_heads.html();
    CHECK(hh.find("Attention heads") != std::string::npos);
    CHECK(hh.find("Head contribution (darker = more important)") != std::string::npos);
    CHECK(hh.find("Head importance (darker = more important)") != std::string::npos);
    CHECK(hh.find(">decoder.0.cross_attention</text>") != std::string::npos);
    CHECK(hh.find(">7.50</text>") != std::string::npos);
    CHECK(hh.find(">head 1</text>") != std::string::npos);
}
