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
