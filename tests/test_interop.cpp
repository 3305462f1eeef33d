// Interop name maps (io/name_map.hpp) against state dicts written by PyTorch 1.13 in the
// layouts of torch.nn.Transformer, HF BertModel and HF AlbertForPreTraining
// (tests/fixtures/interop/*.safetensors, with inputs and torch's outputs in *.txt; written by
// tests/fixtures/interop/make.py). Each layout: load through the map, run the forward, compare
// with torch (double vs float64 at rtol 1e-9, float vs float32 at rtol 1e-4 on every ISA path
// and backend: parity.hpp's run_case; DEPTHLAB_PARITY_REPORT=1 prints the errors); export
// through the map and compare the file with torch's tensor by tensor, bit for bit; and the
// error cases (missing tensor, wrong shape, duplicate names, unknown / rejected tensors, tied
// copies that differ, a map that does not fit the model), each leaving the model unchanged.
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "parity.hpp"
#include "temp_dir.hpp"

namespace {

namespace dio = depthlab::io;
namespace dnn = depthlab::nn;
using depthlab::index_t;
using depthlab::Tensor;
using depthlab_test::Run;
namespace fs = std::filesystem;

struct interop_dir : depthlab_test::temp_dir {
    interop_dir() : depthlab_test::temp_dir("interop") {}
};

std::string state_dict(const std::string& name) { return std::string(DEPTHLAB_FIXTURE_DIR) + "/interop/" + name + ".safetensors"; }


template <class T, class B>
dnn::token_batch batch_of(const Run<T, B>& r, const std::string& ids, const std::string& lengths, const std::string& segments = "") {
    const auto& t = r.fx.get(ids);
    dnn::token_batch b;
    b.batch = t.shape[0];
    b.length = t.shape[1];
    b.ids = r.ids(ids);
    b.segments = segments.empty() ? std::vector<std::int64_t>(b.ids.size(), 0) : r.ids(segments);
    b.lengths = r.lengths(lengths);
    return b;
}

// ---- the models of the fixtures ----
dnn::seq2seq_config fixture_seq2seq(bool pre_ln) {
    dnn::seq2seq_config c;
    c.src_vocab = 11;
    c.tgt_vocab = 13;
    c.share_embeddings = false;
    c.tie_output = !pre_ln;
    c.encoder_layers = c.decoder_layers = 2;
    c.max_len = 16;
    c.layer = {.dim = 16, .heads = 4, .ff_dim = 32, .act = pre_ln ? dnn::activation::gelu_erf : dnn::activation::relu, .dropout = 0.0,
               .attention_dropout = 0.0, .norm_first = pre_ln, .ln_eps = 1e-5, .init = dnn::init_scheme::xavier};
    return c;
}
dnn::albert_config fixture_bert() {
    return {.vocab = 23, .embed = 16, .max_len = 12, .segments = 2, .depth = 2,
            .layer = {.dim = 16, .heads = 4, .ff_dim = 32, .act = dnn::activation::gelu_erf, .dropout = 0.0, .attention_dropout = 0.0,
                      .norm_first = false, .ln_eps = 1e-12, .init = dnn::init_scheme::bert}};
}
dnn::albert_config fixture_albert() {
    dnn::albert_config c = fixture_bert();
    c.embed = 8;
    c.depth = 3;
    c.layer.act = dnn::activation::gelu;  // HF ALBERT's "gelu_new"
    return c;
}

/// tanh(pooler(hidden[:, 0])): HF's pooler_output.
template <class T, class B>
depthlab::Var<T, B> pooled(const depthlab::Var<T, B>& hidden, const dnn::Linear<T, B>& pooler) {
    const auto& s = hidden.shape();
    std::vector<std::int64_t> cls;
    for (index_t b = 0; b < s[0]; ++b) cls.push_back(b * s[1]);
    return depthlab::tanh(pooler(depthlab::gather_rows(depthlab::reshape(hidden, {s[0] * s[1], s[2]}), cls)));
}

template <class M>
std::map<std::string, std::vector<double>> snapshot(const M& m) {
    std::map<std::string, std::vector<double>> out;
    for (const auto& [name, p] : m.named_parameters()) out[name] = depthlab_test::to_double(p.value());
    return out;
}

/// `got` holds exactly the tensors of `want` (less `skip`), same dtypes, shapes and bytes.
void check_same_tensors(const std::string& got_path, const std::string& want_path, const std::set<std::string>& skip = {}) {
    const dio::safetensors_file got(got_path), want(want_path);
    std::set<std::string> g(got.names().begin(), got.names().end()), w;
    for (const auto& n : want.names())
        if (!skip.count(n)) w.insert(n);
    CHECK(g == w);
    for (const auto& n : w) {
        if (!got.contains(n)) continue;
        INFO("tensor ", n);
        CHECK(got.entry(n).shape == want.entry(n).shape);
        CHECK(got.entry(n).dtype == want.entry(n).dtype);
        CHECK(got.read_bytes(n) == want.read_bytes(n));
    }
    CHECK(got.metadata().at("format") == "pt");
}

/// A copy of `src` without `drop`, with `replace` substituted (name -> float tensor).
void rewrite(const std::string& src, const std::string& dst, const std::set<std::string>& drop,
             const std::map<std::string, Tensor<float>>& replace = {}) {
    const dio::safetensors_file f(src);
    dio::safetensors_writer w;
    for (const auto& n : f.names()) {
        if (drop.count(n)) continue;
        if (replace.count(n)) {
            w.add(n, replace.at(n));
            continue;
        }
        const auto bytes = f.read_bytes(n);
        w.add_raw(n, f.entry(n).dtype, f.entry(n).shape, [bytes](const depthlab::io::byte_sink& put) { put(bytes.data(), bytes.size()); });
    }
    for (const auto& [n, t] : replace)
        if (!f.contains(n)) w.add(n, t);
    w.write(dst);
}

/// Runs `load`, which must throw E; CHECKs that its message holds every piece and that the
/// model's parameters did not change.
template <class E, class M, class F>
void check_failed_load(const M& model, F&& load, const std::vector<std::string>& pieces) {
    const auto before = snapshot(model);
    std::string msg;
    try {
        load();
        FAIL_CHECK("the load did not throw");
    } catch (const E& e) {
        msg = e.what();
    }
    for (const auto& p : pieces) {
        INFO("message: ", msg);
        CHECK_MESSAGE(msg.find(p) != std::string::npos, "missing '", p, "'");
    }
    CHECK(snapshot(model) == before);
}

}  // namespace

// ---------------------------------------------------------------- parity with torch
TEST_CASE("interop: torch.nn.Transformer state dicts (pre-LN erf GELU, post-LN ReLU) load and match torch") {
    for (const bool pre : {true, false}) {
        const std::string name = pre ? "torch_transformer_preln" : "torch_transformer_postln";
        depthlab_test::run_case("interop/" + name, [&]<class T, class B>(Run<T, B>& r) {
            const auto cfg = fixture_seq2seq(pre);
            dnn::Seq2SeqTransformer<T, B> model(cfg, 5);
            model.eval();
            const auto rep = dio::load_parameters(state_dict(name), model, dio::torch_transformer_names(cfg));
            CHECK(rep.kept.empty());
            CHECK(rep.ignored.empty());
            const auto src = batch_of(r, "src", "src_lengths"), tgt = batch_of(r, "tgt_in", "tgt_lengths");
            r.check("logits", model.decode(model.encode(src), src, tgt).value());
        }, true);
    }
}

TEST_CASE("interop: an HF BertModel state dict loads into an untied Albert (embed == dim) and matches") {
    depthlab_test::run_case("interop/hf_bert", []<class T, class B>(Run<T, B>& r) {
        const auto cfg = fixture_bert();
        dnn::Albert<T, B, dnn::untied> model(cfg, 5);
        model.eval();
        const auto rep = dio::load_parameters(state_dict("hf_bert"), model, dio::hf_bert_names(cfg));
        CHECK(rep.kept.size() == 7);  // mlm.*, sop_classifier.*: BertModel has no heads
        CHECK(rep.fixed == std::vector<std::string>{"embeddings.projection.weight", "embeddings.projection.bias"});
        CHECK(rep.ignored == std::vector<std::string>{"embeddings.position_ids"});
        const auto h = model.encode(batch_of(r, "ids", "lengths", "segments"));
        r.check("hidden", h.value());
        r.check("pooled", pooled(h, *model.pooler).value());
    }, true);
}

TEST_CASE("interop: an HF AlbertForPreTraining state dict loads into a tied Albert and matches, heads included") {
    depthlab_test::run_case("interop/hf_albert", []<class T, class B>(Run<T, B>& r) {
        const auto cfg = fixture_albert();
        dnn::Albert<T, B> model(cfg, 5);
        model.mlm_norm->eps = 1e-5;  // AlbertMLMHead's LayerNorm has PyTorch's default eps
        model.eval();
        const auto rep = dio::load_parameters(state_dict("hf_albert"), model, dio::hf_albert_names(cfg));
        CHECK(rep.kept.empty());
        CHECK(rep.ignored == std::vector<std::string>{"albert.embeddings.position_ids"});
        const auto h = model.encode(batch_of(r, "ids", "lengths", "segments"));
        r.check("hidden", h.value());
        r.check("pooled", pooled(h, *model.pooler).value());
        const auto& s = h.shape();
        std::vector<std::int64_t> all;
        for (index_t i = 0; i < s[0] * s[1]; ++i) all.push_back(i);
        r.check("mlm", model.mlm_logits(h, all).value().reshape({s[0], s[1], cfg.vocab}));
        r.check("sop", model.sop_logits(h).value());
    }, true);
}

// ---------------------------------------------------------------- export round trips
TEST_CASE("interop: save_parameters writes back exactly torch's tensors (names, shapes, bits)") {
    interop_dir dir;
    SUBCASE("nn.Transformer pre-LN and post-LN") {
        for (const bool pre : {true, false}) {
            const std::string name = pre ? "torch_transformer_preln" : "torch_transformer_postln";
            const auto cfg = fixture_seq2seq(pre);
            const auto map = dio::torch_transformer_names(cfg);
            dnn::Seq2SeqTransformer<float> model(cfg, 5);
            dio::load_parameters(state_dict(name), model, map);
            dio::save_parameters(dir.file(name), model, map);
            check_same_tensors(dir.file(name), state_dict(name));
        }
    }
    SUBCASE("BertModel") {
        const auto map = dio::hf_bert_names(fixture_bert());
        dnn::Albert<float, depthlab::backend::cpu, dnn::untied> model(fixture_bert(), 5);
        dio::load_parameters(state_dict("hf_bert"), model, map);
        const auto rep = dio::save_parameters(dir.file("bert"), model, map);
        CHECK(rep.kept.size() == 7);
        check_same_tensors(dir.file("bert"), state_dict("hf_bert"), {"embeddings.position_ids"});
        // a projection that is not the identity cannot be exported as BERT
        model.embeddings->projection->weight.value().fill_(0.5f);
        check_failed_load<depthlab::usage_error>(model, [&] { dio::save_parameters(dir.file("bert2"), model, map); },
                                                 {"'embeddings.projection.weight' must be the identity", "BERT has no embedding projection"});
        CHECK_FALSE(fs::exists(dir.file("bert2")));
    }
    SUBCASE("BertForPreTraining (no torch file: a round trip through HF's names, heads included)") {
        dnn::Albert<float, depthlab::backend::cpu, dnn::untied> model(fixture_bert(), 5);
        dio::load_parameters(state_dict("hf_bert"), model, dio::hf_bert_names(fixture_bert()));  // projection := identity
        const auto map = dio::hf_bert_names(fixture_bert(), {.head = dio::hf_head::pretraining});
        dio::save_parameters(dir.file("bert_pt"), model, map);
        const dio::safetensors_file f(dir.file("bert_pt"));
        CHECK(f.names().size() == 40 - 1 + 7 + 2);  // BertModel's tensors less position_ids, 7 head tensors, 2 tied copies
        for (const char* n : {"bert.embeddings.word_embeddings.weight", "bert.encoder.layer.1.attention.self.value.bias",
                              "bert.encoder.layer.1.output.LayerNorm.weight", "bert.pooler.dense.weight", "cls.predictions.transform.dense.weight",
                              "cls.predictions.transform.LayerNorm.bias", "cls.predictions.bias", "cls.predictions.decoder.weight",
                              "cls.predictions.decoder.bias", "cls.seq_relationship.weight"})
            CHECK_MESSAGE(f.contains(n), n);
        dnn::Albert<float, depthlab::backend::cpu, dnn::untied> back(fixture_bert(), 6);
        dio::load_parameters(dir.file("bert_pt"), back, map);
        CHECK(snapshot(back) == snapshot(model));
    }
    SUBCASE("AlbertForPreTraining, tied copies included; without them too") {
        const auto cfg = fixture_albert();
        const auto map = dio::hf_albert_names(cfg);
        dnn::Albert<float> model(cfg, 5);
        dio::load_parameters(state_dict("hf_albert"), model, map);
        dio::save_parameters(dir.file("albert"), model, map);
        check_same_tensors(dir.file("albert"), state_dict("hf_albert"), {"albert.embeddings.position_ids"});
        dio::save_parameters(dir.file("albert_untied_copies"), model, map, {}, {.write_tied = false});
        check_same_tensors(dir.file("albert_untied_copies"), state_dict("hf_albert"),
                           {"albert.embeddings.position_ids", "predictions.decoder.weight", "predictions.decoder.bias"});
        // a file without the tied copies loads too (as HF's save_pretrained writes it)
        dnn::Albert<float> back(cfg, 6);
        dio::load_parameters(dir.file("albert_untied_copies"), back, map);
        CHECK(snapshot(back) == snapshot(model));
    }
}

TEST_CASE("interop: ACT-ALBERT's halting unit, kept or as an extra tensor") {
    interop_dir dir;
    const auto cfg = fixture_albert();
    dnn::Albert<float> plain(cfg, 5);
    dio::load_parameters(state_dict("hf_albert"), plain, dio::hf_albert_names(cfg));
    depthlab::halting::ActAlbert<float> act(cfg, {}, 7);
    const auto halting_before = depthlab_test::to_double(act.encoder->halting_unit->weight.value());
    const auto rep = dio::load_parameters(state_dict("hf_albert"), act, dio::hf_albert_names(cfg, {.halting = dio::act_halting::keep}));
    CHECK(rep.kept == std::vector<std::string>{"encoder.halting.weight", "encoder.halting.bias"});
    CHECK(depthlab_test::to_double(act.encoder->halting_unit->weight.value()) == halting_before);
    for (const auto& [name, p] : plain.named_parameters()) CHECK(depthlab_test::to_double(act.parameter(name).value()) == depthlab_test::to_double(p.value()));

    const auto extra = dio::hf_albert_names(cfg, {.halting = dio::act_halting::extra_tensor});
    dio::save_parameters(dir.file("act"), act, extra);
    const dio::safetensors_file f(dir.file("act"));
    CHECK(f.contains("depthlab.encoder.halting.weight"));
    CHECK(f.contains("depthlab.encoder.halting.bias"));
    depthlab::halting::ActAlbert<float> back(cfg, {}, 8);
    dio::load_parameters(dir.file("act"), back, extra);
    CHECK(snapshot(back) == snapshot(act));
    // a plain HF checkpoint has no halting unit to load
    check_failed_load<depthlab::io_error>(back, [&] { dio::load_parameters(state_dict("hf_albert"), back, extra); },
                                          {"no tensor 'depthlab.encoder.halting.weight' (1, 16) for depthlab 'encoder.halting.weight' (1, 16)"});
}

// ---------------------------------------------------------------- errors
TEST_CASE("interop: failed loads name the file, both names and both shapes, and leave the model unchanged") {
    interop_dir dir;
    const auto cfg = fixture_albert();
    const auto map = dio::hf_albert_names(cfg);
    dnn::Albert<float> model(cfg, 5);
    const std::string q = "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.key.weight";

    SUBCASE("a missing tensor (one part of the fused in_proj)") {
        rewrite(state_dict("hf_albert"), dir.file("missing"), {q});
        check_failed_load<depthlab::io_error>(model, [&] { dio::load_parameters(dir.file("missing"), model, map); },
                                              {dir.file("missing"), "hf AlbertForPreTraining",
                                               "no tensor '" + q + "' (16, 16) for part 2 of 3 of depthlab "
                                               "'encoder.shared.self_attention.in_proj_weight' (48, 16)"});
    }
    SUBCASE("a wrong shape") {
        rewrite(state_dict("hf_albert"), dir.file("shape"), {}, {{"albert.pooler.weight", Tensor<float>::zeros({16, 8})}});
        check_failed_load<depthlab::io_error>(model, [&] { dio::load_parameters(dir.file("shape"), model, map); },
                                              {dir.file("shape"), "tensor 'albert.pooler.weight' for depthlab 'pooler.weight' (16, 16) has shape (16, 8), expected (16, 16)"});
    }
    SUBCASE("a duplicate mapping is refused when the map is built") {
        auto m = dio::hf_albert_names(cfg);
        CHECK_THROWS_WITH_AS(m.add("extra.weight", "albert.pooler.weight"),
                             "name_map hf AlbertForPreTraining: external name 'albert.pooler.weight' is used twice: 'pooler.weight' and 'extra.weight'",
                             depthlab::usage_error);
        CHECK_THROWS_WITH_AS(m.add("pooler.weight", "somewhere.else"),
                             "name_map hf AlbertForPreTraining: depthlab parameter 'pooler.weight' is mapped twice", depthlab::usage_error);
        CHECK_THROWS_WITH_AS(dio::name_map("mine", {{"a", "x"}, {"b", "x"}}), "name_map mine: external name 'x' is used twice: 'a' and 'b'",
                             depthlab::usage_error);
        // the map is unchanged by the refused additions: it still loads
        dio::load_parameters(state_dict("hf_albert"), model, m);
    }
    SUBCASE("tensors the map does not know: an error, or ignored and listed with allow_extra") {
        rewrite(state_dict("hf_albert"), dir.file("extra"), {}, {{"albert.pooler.extra", Tensor<float>::zeros({3})}});
        check_failed_load<depthlab::io_error>(model, [&] { dio::load_parameters(dir.file("extra"), model, map); },
                                              {"1 tensor(s) the map does not know", "'albert.pooler.extra'"});
        const auto rep = dio::load_parameters(dir.file("extra"), model, map, {.allow_extra = true});
        CHECK(rep.ignored == std::vector<std::string>{"albert.embeddings.position_ids", "albert.pooler.extra"});
    }
    SUBCASE("tied copies that differ") {
        rewrite(state_dict("hf_albert"), dir.file("tied"), {}, {{"predictions.decoder.bias", Tensor<float>::zeros({23})}});
        check_failed_load<depthlab::io_error>(model, [&] { dio::load_parameters(dir.file("tied"), model, map); },
                                              {"tensor 'predictions.decoder.bias' differs from 'predictions.bias'", "ties both to 'mlm.bias'"});
    }
    SUBCASE("a map that does not fit the model") {
        dnn::Albert<float, depthlab::backend::cpu, dnn::untied> untied(cfg, 5);
        check_failed_load<depthlab::usage_error>(untied, [&] { dio::load_parameters(state_dict("hf_albert"), untied, map); },
                                                 {"the name map does not fit the model", "no entry for", "'encoder.0.self_attention.in_proj_weight'",
                                                  "the model does not have: 'encoder.shared."});
    }
    SUBCASE("nn.Transformer's final norms into a post-LN model are rejected") {
        const auto scfg = fixture_seq2seq(false);
        dnn::Seq2SeqTransformer<float> s2s(scfg, 5);
        rewrite(state_dict("torch_transformer_postln"), dir.file("norms"), {},
                {{"encoder.norm.weight", Tensor<float>::ones({16})}, {"encoder.norm.bias", Tensor<float>::zeros({16})}});
        check_failed_load<depthlab::io_error>(s2s, [&] { dio::load_parameters(dir.file("norms"), s2s, dio::torch_transformer_names(scfg), {.allow_extra = true}); },
                                              {"tensor 'encoder.norm.weight' cannot be loaded: a post-LN depthlab model has no final LayerNorm"});
    }
}

TEST_CASE("interop: gelu_erf is a config name") {
    dnn::transformer_config c;
    c.act = dnn::activation::gelu_erf;
    dio::metadata_map md;
    dio::save_config(md, "l.", c);
    CHECK(md.at("l.activation") == "gelu_erf");
    CHECK(dio::load_config<dnn::transformer_config>(md, "l.").act == dnn::activation::gelu_erf);
}

// ---------------------------------------------------------------- Hugging Face model folders
// io::from_pretrained / io::save_pretrained (io/pretrained.hpp): config.json + model.safetensors.
namespace {

nlohmann::json pretrained_test_json(const std::string& path) {
    std::ifstream in(path);
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
}
/// A config's fields as io::save_config writes them (to compare two configs field by field).
dio::metadata_map pretrained_test_fields(const dnn::albert_config& c) {
    dio::metadata_map m;
    dio::save_config(m, "", c);
    return m;
}
doctest::Contains pretrained_test_has(const std::string& s) { return doctest::Contains(s.c_str()); }
using pretrained_test_bert = dnn::Albert<float, depthlab::backend::cpu, dnn::untied>;

}  // namespace

TEST_CASE("interop: save_pretrained writes an HF folder that from_pretrained reads back bit for bit") {
    interop_dir dir;
    SUBCASE("tied ALBERT") {
        auto cfg = fixture_albert();
        cfg.layer.dropout = 0.1;
        cfg.layer.attention_dropout = 0.05;
        cfg.sop_dropout = 0.2;
        cfg.layer.ln_eps = 1e-7;
        dnn::Albert<float> model(cfg, 5);
        dio::save_pretrained(model, dir.str());
        CHECK(dir.listing() == std::vector<std::string>{"config.json", "model.safetensors"});
        const nlohmann::json want = {{"model_type", "albert"},
                                     {"architectures", nlohmann::json::array({"AlbertForPreTraining"})},
                                     {"vocab_size", 23},
                                     {"embedding_size", 8},
                                     {"hidden_size", 16},
                                     {"num_hidden_layers", 3},
                                     {"num_hidden_groups", 1},
                                     {"inner_group_num", 1},
                                     {"num_attention_heads", 4},
                                     {"intermediate_size", 32},
                                     {"hidden_act", "gelu_new"},
                                     {"hidden_dropout_prob", 0.1},
                                     {"attention_probs_dropout_prob", 0.05},
                                     {"classifier_dropout_prob", 0.2},
                                     {"max_position_embeddings", 12},
                                     {"type_vocab_size", 2},
                                     {"layer_norm_eps", 1e-7},
                                     {"initializer_range", 0.02},
                                     {"position_embedding_type", "absolute"}};
        CHECK(pretrained_test_json(dir.file("config.json")) == want);
        const dio::pretrained_config pc = dio::read_pretrained_config(dir.str());
        CHECK(pc.model_type == dio::hf_model::albert);
        CHECK(pc.tied);
        CHECK(pretrained_test_fields(pc.cfg) == pretrained_test_fields(cfg));
        const dio::safetensors_file f(dir.file("model.safetensors"));
        CHECK(f.contains("albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"));
        CHECK(f.contains("sop_classifier.classifier.weight"));
        CHECK_FALSE(f.contains("predictions.decoder.weight"));  // the tied copies are left out, as transformers' save_pretrained does
        const auto back = dio::from_pretrained<dnn::Albert<float>>(dir.str(), 9);
        CHECK(snapshot(*back) == snapshot(model));
        CHECK(pretrained_test_fields(back->cfg) == pretrained_test_fields(cfg));
        CHECK(back->mlm_norm->eps == 1e-5);  // AlbertMLMHead's LayerNorm (io/layouts.hpp)
        // saving again over the folder replaces both files
        dio::save_pretrained(*back, dir.str());
        CHECK(dir.listing() == std::vector<std::string>{"config.json", "model.safetensors"});
    }
    SUBCASE("untied ALBERT (a layer group per layer), in double") {
        auto cfg = fixture_albert();
        cfg.layer.act = dnn::activation::gelu_erf;
        using model_t = dnn::Albert<double, depthlab::backend::cpu, dnn::untied>;
        model_t model(cfg, 5);
        dio::save_pretrained(model, dir.str());
        const auto j = pretrained_test_json(dir.file("config.json"));
        CHECK(j.at("num_hidden_groups") == 3);
        CHECK(j.at("inner_group_num") == 1);
        CHECK(j.at("hidden_act") == "gelu");
        CHECK(dio::safetensors_file(dir.file("model.safetensors")).entry("albert.encoder.albert_layer_groups.2.albert_layers.0.ffn.weight").dtype == "F64");
        CHECK_FALSE(dio::read_pretrained_config(dir.str()).tied);
        const auto back = dio::from_pretrained<model_t>(dir.str(), 9);
        CHECK(snapshot(*back) == snapshot(model));
        CHECK(pretrained_test_fields(back->cfg) == pretrained_test_fields(cfg));
    }
    SUBCASE("BERT (an untied Albert with embed == dim and an identity projection), ReLU; what BERT cannot hold") {
        auto cfg = fixture_bert();
        cfg.layer.act = dnn::activation::relu;
        pretrained_test_bert model(cfg, 5);
        // a random embedding projection has no place in BERT: nothing is written
        CHECK_THROWS_WITH_AS(dio::save_pretrained(model, dir.str(), dio::hf_model::bert),
                             doctest::Contains("'embeddings.projection.weight' must be the identity"), depthlab::usage_error);
        CHECK_FALSE(fs::exists(dir.file("model.safetensors")));
        CHECK_FALSE(fs::exists(dir.file("config.json")));
        dio::load_parameters(state_dict("hf_bert"), model, dio::hf_bert_names(cfg));  // projection := identity
        dio::save_pretrained(model, dir.str(), dio::hf_model::bert);
        const nlohmann::json want = {{"model_type", "bert"},
                                     {"architectures", nlohmann::json::array({"BertForPreTraining"})},
                                     {"vocab_size", 23},
                                     {"hidden_size", 16},
                                     {"num_hidden_layers", 2},
                                     {"num_attention_heads", 4},
                                     {"intermediate_size", 32},
                                     {"hidden_act", "relu"},
                                     {"hidden_dropout_prob", 0.0},
                                     {"attention_probs_dropout_prob", 0.0},
                                     {"max_position_embeddings", 12},
                                     {"type_vocab_size", 2},
                                     {"layer_norm_eps", 1e-12},
                                     {"initializer_range", 0.02},
                                     {"position_embedding_type", "absolute"}};
        CHECK(pretrained_test_json(dir.file("config.json")) == want);
        const dio::safetensors_file f(dir.file("model.safetensors"));
        CHECK(f.contains("bert.encoder.layer.1.output.LayerNorm.weight"));
        CHECK(f.contains("cls.seq_relationship.weight"));
        CHECK_FALSE(f.contains("cls.predictions.decoder.weight"));
        CHECK(dio::read_pretrained_config(dir.str()).model_type == dio::hf_model::bert);
        const auto back = dio::from_pretrained<pretrained_test_bert>(dir.str(), 9);
        CHECK(snapshot(*back) == snapshot(model));
        CHECK(pretrained_test_fields(back->cfg) == pretrained_test_fields(cfg));
        CHECK(back->mlm_norm->eps == 1e-12);  // BERT's MLM transform uses layer_norm_eps

        const std::string other = dir.file("other");
        dnn::Albert<float> tied(cfg, 5);
        CHECK_THROWS_WITH_AS(dio::save_pretrained(tied, other, dio::hf_model::bert), doctest::Contains("save an nn::Albert<T, B, nn::untied> as bert"),
                             depthlab::usage_error);
        pretrained_test_bert factorised(fixture_albert(), 5);
        CHECK_THROWS_WITH_AS(dio::save_pretrained(factorised, other, dio::hf_model::bert), doctest::Contains("embed 8 must equal dim 16"),
                             depthlab::usage_error);
        model.cfg.sop_dropout = 0.1;
        CHECK_THROWS_WITH_AS(dio::save_pretrained(model, other, dio::hf_model::bert), doctest::Contains("sop_dropout 0.1 has no config.json key"),
                             depthlab::usage_error);
        auto pre_cfg = cfg;
        pre_cfg.layer.norm_first = true;
        pretrained_test_bert pre_ln(pre_cfg, 5);
        CHECK_THROWS_WITH_AS(dio::save_pretrained(pre_ln, other), doctest::Contains("are post-LN"), depthlab::usage_error);
        CHECK_FALSE(fs::exists(other));
    }
}

TEST_CASE("interop: from_pretrained reads a config.json as transformers writes it, its other keys ignored") {
    interop_dir dir;
    SUBCASE("ALBERT") {
        const auto cfg = fixture_albert();
        dnn::Albert<float> model(cfg, 5);
        dio::save_pretrained(model, dir.str());
        // AlbertConfig as transformers 4.x writes it: sorted keys, integer zeros for the dropouts
        // (as albert-base-v2's config.json has them), and keys depthlab has no use for.
        dio::write_file_atomically(dir.file("config.json"), R"({
  "_name_or_path": "albert-tiny",
  "architectures": [
    "AlbertForPreTraining"
  ],
  "attention_probs_dropout_prob": 0,
  "bos_token_id": 2,
  "classifier_dropout_prob": 0.1,
  "down_scale_factor": 1,
  "embedding_size": 8,
  "eos_token_id": 3,
  "gap_size": 0,
  "hidden_act": "gelu_new",
  "hidden_dropout_prob": 0,
  "hidden_size": 16,
  "initializer_range": 0.02,
  "inner_group_num": 1,
  "intermediate_size": 32,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 12,
  "model_type": "albert",
  "net_structure_type": 0,
  "num_attention_heads": 4,
  "num_hidden_groups": 1,
  "num_hidden_layers": 3,
  "num_memory_blocks": 0,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "torch_dtype": "float32",
  "transformers_version": "4.30.2",
  "type_vocab_size": 2,
  "vocab_size": 23
}
)");
        const auto back = dio::from_pretrained<dnn::Albert<float>>(dir.str());
        CHECK(snapshot(*back) == snapshot(model));
        auto want = cfg;
        want.sop_dropout = 0.1;
        CHECK(pretrained_test_fields(back->cfg) == pretrained_test_fields(want));
    }
    SUBCASE("BERT: a BertModel's tensors under the 'bert.' prefix (no heads: the model's keep their fresh values)") {
        const auto cfg = fixture_bert();
        pretrained_test_bert model(cfg, 5);
        dio::load_parameters(state_dict("hf_bert"), model, dio::hf_bert_names(cfg));
        dio::save_parameters(dir.file("model.safetensors"), model, dio::hf_bert_names(cfg, {.prefix = "bert."}));
        dio::write_file_atomically(dir.file("config.json"), R"({
  "architectures": ["BertModel"],
  "attention_probs_dropout_prob": 0.0,
  "classifier_dropout": null,
  "gradient_checkpointing": false,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.0,
  "hidden_size": 16,
  "initializer_range": 0.02,
  "intermediate_size": 32,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 12,
  "model_type": "bert",
  "num_attention_heads": 4,
  "num_hidden_layers": 2,
  "pad_token_id": 0,
  "position_embedding_type": "absolute",
  "torch_dtype": "float32",
  "transformers_version": "4.30.2",
  "type_vocab_size": 2,
  "use_cache": true,
  "vocab_size": 23
}
)");
        const auto back = dio::from_pretrained<pretrained_test_bert>(dir.str(), 5);  // seed 5: the same fresh heads as `model`'s
        CHECK(snapshot(*back) == snapshot(model));
        CHECK(pretrained_test_fields(back->cfg) == pretrained_test_fields(cfg));
    }
}

TEST_CASE("interop: from_pretrained's errors name the file and the key") {
    interop_dir dir;
    using tied_albert = dnn::Albert<float>;
    const tied_albert model(fixture_albert(), 5);
    dio::save_pretrained(model, dir.str());
    const std::string config = dir.file("config.json"), weights = dir.file("model.safetensors");
    const nlohmann::json good = pretrained_test_json(config);
    const auto write = [&](const nlohmann::json& j) { dio::write_file_atomically(config, j.dump(2)); };
    const auto with = [&](const char* key, const nlohmann::json& value) {
        nlohmann::json j = good;
        j[key] = value;
        write(j);
    };
    const auto load = [&] { (void)dio::from_pretrained<tied_albert>(dir.str()); };
    const std::string in_config = "pretrained config " + config + ": ";

    SUBCASE("no folder, no config.json") {
        const std::string nowhere = dir.file("nowhere");
        CHECK_THROWS_WITH_AS((void)dio::from_pretrained<tied_albert>(nowhere),
                             pretrained_test_has(dir.file("nowhere/config.json") + ": the folder " + nowhere + " does not exist"), depthlab::io_error);
        fs::remove(config);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "cannot open: No such file or directory"), depthlab::io_error);
        CHECK_THROWS_WITH_AS(dio::read_pretrained_config(dir.str()), pretrained_test_has(in_config + "cannot open"), depthlab::io_error);
    }
    SUBCASE("malformed JSON, not an object") {
        dio::write_file_atomically(config, "{\"model_type\": \"albert\",");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "malformed JSON: "), depthlab::io_error);
        dio::write_file_atomically(config, "[1, 2]");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "a JSON array, not an object"), depthlab::io_error);
    }
    SUBCASE("a missing key") {
        nlohmann::json j = good;
        j.erase("hidden_size");
        write(j);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "no key 'hidden_size' (an ALBERT config needs it)"), depthlab::io_error);
        j = good;
        j.erase("model_type");
        write(j);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "no key 'model_type'"), depthlab::io_error);
    }
    SUBCASE("a key of the wrong type or out of range") {
        with("hidden_size", "16");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'hidden_size' is \"16\", not an integer"), depthlab::io_error);
        with("layer_norm_eps", "1e-12");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'layer_norm_eps' is \"1e-12\", not a number"), depthlab::io_error);
        with("vocab_size", -3);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'vocab_size' = -3 is not a size"), depthlab::io_error);
        with("hidden_dropout_prob", 1.5);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'hidden_dropout_prob' = 1.5 is not a dropout probability"), depthlab::io_error);
        with("num_attention_heads", 5);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'hidden_size' = 16 is not divisible by 'num_attention_heads' = 5"),
                             depthlab::io_error);
    }
    SUBCASE("unsupported values") {
        with("hidden_act", "swish");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'hidden_act' = \"swish\" is not supported"), depthlab::io_error);
        with("model_type", "gpt2");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'model_type' = \"gpt2\" is not supported"), depthlab::io_error);
        with("num_hidden_groups", 2);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'num_hidden_groups' = 2 with 'num_hidden_layers' = 3 is not supported"),
                             depthlab::io_error);
        with("inner_group_num", 2);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'inner_group_num' = 2 is not supported"), depthlab::io_error);
        with("position_embedding_type", "relative_key");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'position_embedding_type' = \"relative_key\" is not supported"),
                             depthlab::io_error);
    }
    SUBCASE("a folder whose model is not Model") {
        CHECK_THROWS_WITH_AS((void)dio::from_pretrained<pretrained_test_bert>(dir.str()),
                             pretrained_test_has("from_pretrained " + config + ": 'num_hidden_groups' = 1 with 'num_hidden_layers' = 3 is a tied ALBERT"),
                             depthlab::io_error);
        CHECK_THROWS_WITH_AS((void)dio::from_pretrained<pretrained_test_bert>(dir.str()),
                             doctest::Contains("load it into nn::Albert<T, B, nn::tied>, not nn::Albert<T, B, nn::untied>"), depthlab::io_error);
        with("model_type", "bert");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has("from_pretrained " + config + ": 'model_type' \"bert\" has a layer per position"),
                             depthlab::io_error);
    }
    SUBCASE("sizes that do not match the weights") {
        with("vocab_size", 30);
        CHECK_THROWS_WITH_AS(load(),
                             pretrained_test_has(config + "'s 'vocab_size' = 30 and 'embedding_size' = 8 give tensor "
                                                          "'albert.embeddings.word_embeddings.weight' the shape (30, 8), but " + weights + " has (23, 8)"),
                             depthlab::io_error);
        with("intermediate_size", 64);
        CHECK_THROWS_WITH_AS(load(),
                             pretrained_test_has("'intermediate_size' = 64 and 'hidden_size' = 16 give tensor "
                                                 "'albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight' the shape (64, 16)"),
                             depthlab::io_error);
    }
    SUBCASE("no model.safetensors; pytorch_model.bin instead; an AlbertForMaskedLM file") {
        rewrite(weights, dir.file("masked"), {"sop_classifier.classifier.weight", "sop_classifier.classifier.bias"});
        fs::remove(weights);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has("checkpoint " + weights + ": cannot open"), depthlab::io_error);
        dio::write_file_atomically(dir.file("pytorch_model.bin"), "not read");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(weights + ": no such file; the folder holds pytorch_model.bin"), depthlab::io_error);
        fs::rename(dir.file("masked"), weights);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(weights + ": the file has the MLM head ('predictions.bias') but no sentence-order head"),
                             depthlab::io_error);
    }
}

// tests/fixtures/interop/hf_albert.config.json and hf_bert.config.json are written by hand, not by
// transformers (which cannot be installed here): their sizes are those make.py builds the modules
// with (the Config(...) calls in its main(), documented at its top), every other key as
// transformers 4.x's AlbertConfig / BertConfig write them, with their default values (the
// fixtures' outputs are computed in eval mode, so the dropouts do not enter them).
TEST_CASE("interop: from_pretrained reads the PyTorch-written HF fixtures with a config.json, and matches torch") {
    interop_dir dir;
    const auto folder = [&](const std::string& name) {
        const std::string d = dir.file(name);
        fs::create_directories(d);
        fs::copy_file(state_dict(name), d + "/model.safetensors");
        fs::copy_file(std::string(DEPTHLAB_FIXTURE_DIR) + "/interop/" + name + ".config.json", d + "/config.json");
        return d;
    };
    const std::string albert_dir = folder("hf_albert"), bert_dir = folder("hf_bert");
    auto albert_cfg = fixture_albert();
    albert_cfg.sop_dropout = 0.1;  // AlbertConfig's classifier_dropout_prob
    auto bert_cfg = fixture_bert();
    bert_cfg.layer.dropout = bert_cfg.layer.attention_dropout = 0.1;  // BertConfig's
    depthlab_test::run_case("interop/hf_albert", [&]<class T, class B>(Run<T, B>& r) {
        const auto model = dio::from_pretrained<dnn::Albert<T, B>>(albert_dir);  // AlbertForPreTraining: heads included
        CHECK(pretrained_test_fields(model->cfg) == pretrained_test_fields(albert_cfg));
        model->eval();
        const auto h = model->encode(batch_of(r, "ids", "lengths", "segments"));
        r.check("hidden", h.value());
        r.check("pooled", pooled(h, *model->pooler).value());
        const auto& s = h.shape();
        std::vector<std::int64_t> all;
        for (index_t i = 0; i < s[0] * s[1]; ++i) all.push_back(i);
        r.check("mlm", model->mlm_logits(h, all).value().reshape({s[0], s[1], albert_cfg.vocab}));
        r.check("sop", model->sop_logits(h).value());
    }, true);
    depthlab_test::run_case("interop/hf_bert", [&]<class T, class B>(Run<T, B>& r) {
        const auto model = dio::from_pretrained<dnn::Albert<T, B, dnn::untied>>(bert_dir);  // BertModel: no prefix, no heads
        CHECK(pretrained_test_fields(model->cfg) == pretrained_test_fields(bert_cfg));
        model->eval();
        const auto h = model->encode(batch_of(r, "ids", "lengths", "segments"));
        r.check("hidden", h.value());
        r.check("pooled", pooled(h, *model->pooler).value());
    }, true);
}

// ---------------------------------------------------------------- GPT-2 (nn::GPT2, io::hf_gpt2_names)
namespace {
/// The sizes make.py builds its hf_gpt2 case with (GPT2Config: n_inner null = 4 n_embd).
dnn::gpt2_config fixture_gpt2() {
    return {.vocab = 23, .positions = 12, .depth = 2,
            .layer = {.dim = 16, .heads = 4, .ff_dim = 64, .act = dnn::activation::gelu, .dropout = 0.0, .attention_dropout = 0.0,
                      .norm_first = true, .ln_eps = 1e-5, .init = dnn::init_scheme::bert}};
}
dio::metadata_map gpt2_fields(const dnn::gpt2_config& c) {
    dio::metadata_map m;
    dio::save_config(m, "", c);
    return m;
}
/// A folder holding the fixture `name` as an HF checkpoint (model.safetensors + config.json).
std::string gpt2_folder(const interop_dir& dir, const std::string& name) {
    const std::string d = dir.file(name);
    fs::create_directories(d);
    fs::copy_file(state_dict(name), d + "/model.safetensors");
    fs::copy_file(std::string(DEPTHLAB_FIXTURE_DIR) + "/interop/" + name + ".config.json", d + "/config.json");
    return d;
}
const std::set<std::string> gpt2_buffers{"transformer.h.0.attn.bias", "transformer.h.0.attn.masked_bias", "transformer.h.1.attn.bias",
                                         "transformer.h.1.attn.masked_bias"};
}  // namespace

TEST_CASE("interop: an HF GPT2LMHeadModel state dict (Conv1D weights, tied lm_head) loads into GPT2 and matches torch") {
    depthlab_test::run_case("interop/hf_gpt2", []<class T, class B>(Run<T, B>& r) {
        const auto cfg = fixture_gpt2();
        dnn::GPT2<T, B> model(cfg, 5);
        model.eval();
        const auto rep = dio::load_parameters(state_dict("hf_gpt2"), model, dio::hf_gpt2_names(cfg));
        CHECK(rep.kept.empty());
        CHECK(std::set<std::string>(rep.ignored.begin(), rep.ignored.end()) == gpt2_buffers);
        const auto b = batch_of(r, "ids", "lengths");
        r.check("hidden", model.hidden(b).value());
        r.check("logits", model.logits(b).value());
    }, true);
}

TEST_CASE("interop: GPT-2 export writes torch's tensors back bit for bit; save/from_pretrained_gpt2 round-trip") {
    interop_dir dir;
    const auto cfg = fixture_gpt2();
    dnn::GPT2<float> model(cfg, 5);
    dio::load_parameters(state_dict("hf_gpt2"), model, dio::hf_gpt2_names(cfg));
    dio::save_parameters(dir.file("gpt2.safetensors"), model, dio::hf_gpt2_names(cfg));
    check_same_tensors(dir.file("gpt2.safetensors"), state_dict("hf_gpt2"), gpt2_buffers);  // (Conv1D transposed back; lm_head written as the tied copy)

    const std::string out = dir.file("export");
    dio::save_pretrained_gpt2(model, out);
    const dio::safetensors_file f(out + "/model.safetensors");
    CHECK(f.contains("transformer.h.1.mlp.c_fc.weight"));
    CHECK(f.entry("transformer.h.1.mlp.c_fc.weight").shape == depthlab::Shape{16, 64});  // Conv1D: (in, out)
    CHECK_FALSE(f.contains("lm_head.weight"));  // tied: left out, as transformers' save_pretrained does
    const auto back = dio::from_pretrained_gpt2<float>(out, 9);
    CHECK(snapshot(*back) == snapshot(model));
    CHECK(gpt2_fields(back->cfg) == gpt2_fields(cfg));

    SUBCASE("the PyTorch-written folders: GPT2LMHeadModel with and without lm_head.weight") {
        auto want = cfg;
        const auto fixture = dio::from_pretrained_gpt2<float>(gpt2_folder(dir, "hf_gpt2"));
        CHECK(gpt2_fields(fixture->cfg) == gpt2_fields(want));
        CHECK(snapshot(*fixture) == snapshot(model));
        const auto lm = dio::from_pretrained_gpt2<float>(std::string(DEPTHLAB_FIXTURE_DIR) + "/interop/hf_gpt2_lm");  // no lm_head.weight, no extra files
        CHECK(lm->cfg.vocab == 120);
        CHECK(lm->cfg.layer.heads == 2);
        CHECK(lm->cfg.layer.ff_dim == 32);
    }
    SUBCASE("a GPT2Model file (no prefix) through a map with prefix \"\"") {
        dio::save_parameters(dir.file("base.safetensors"), model, dio::hf_gpt2_names(cfg, {.prefix = ""}));
        const dio::safetensors_file base(dir.file("base.safetensors"));
        CHECK(base.contains("h.0.attn.c_attn.weight"));
        CHECK_FALSE(base.contains("lm_head.weight"));
        dnn::GPT2<float> again(cfg, 11);
        dio::load_parameters(dir.file("base.safetensors"), again, dio::hf_gpt2_names(cfg, {.prefix = ""}));
        CHECK(snapshot(again) == snapshot(model));
    }
}

TEST_CASE("interop: GPT-2 loading errors name the file, the key and both shapes") {
    interop_dir dir;
    const std::string folder = gpt2_folder(dir, "hf_gpt2");
    const std::string config = folder + "/config.json", in_config = "pretrained config " + config + ": ";
    const nlohmann::json good = pretrained_test_json(config);
    const auto with = [&](const char* key, const nlohmann::json& value) {
        nlohmann::json j = good;
        j[key] = value;
        dio::write_file_atomically(config, j.dump(2));
    };
    const auto load = [&] { (void)dio::from_pretrained_gpt2<float>(folder); };
    SUBCASE("config keys") {
        with("model_type", "bert");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'model_type' = \"bert\" is not \"gpt2\""), depthlab::io_error);
        with("embd_pdrop", 0.2);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has(in_config + "'embd_pdrop' = 0.2 differs from 'resid_pdrop' = 0.0"), depthlab::io_error);
        with("scale_attn_by_inverse_layer_idx", true);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has("'scale_attn_by_inverse_layer_idx' = true is not supported"), depthlab::io_error);
        with("n_head", 3);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has("'n_embd' = 16 is not divisible by 'n_head' = 3"), depthlab::io_error);
        with("activation_function", "swish");
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has("'activation_function' = \"swish\" is not supported"), depthlab::io_error);
    }
    SUBCASE("sizes that do not match the weights") {
        with("n_inner", 32);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has("'n_inner' = 32, 'n_embd' = 16 and 'n_layer' = 2 give tensor 'transformer.h.0.mlp.c_fc.weight' the shape (16, 32)"),
                             depthlab::io_error);
        with("n_layer", 1);
        CHECK_THROWS_WITH_AS(load(), pretrained_test_has("has more blocks than " + config + "'s 'n_layer' = 1"), depthlab::io_error);
    }
    SUBCASE("a Conv1D weight stored as a Linear's (not transposed)") {
        // (a square weight such as c_proj's cannot be caught: the layout, not the shape, says which way it goes)
        rewrite(state_dict("hf_gpt2"), dir.file("bad.safetensors"), {}, {{"transformer.h.0.mlp.c_fc.weight", Tensor<float>::zeros({64, 16})}});
        dnn::GPT2<float> target(fixture_gpt2(), 5);
        check_failed_load<depthlab::io_error>(target, [&] { dio::load_parameters(dir.file("bad.safetensors"), target, dio::hf_gpt2_names(fixture_gpt2())); },
                                              {"tensor 'transformer.h.0.mlp.c_fc.weight' for depthlab 'decoder.0.feed_forward.linear1.weight' (64, 16) (stored transposed) has shape (64, 16), expected (16, 64)"});
    }
}
