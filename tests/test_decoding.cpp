// Incremental decoding (nn/decoding.hpp): the cached step-by-step decoder against the full
// decoder, beam search against greedy search and against teacher-forced scores, and greedy
// decoding of a model trained on the reverse task.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"

using namespace depthlab;
using namespace depthlab::nn;
using doctest::Contains;

namespace {

seq2seq_config decoding_config(bool norm_first) {
    seq2seq_config c;
    c.src_vocab = c.tgt_vocab = 23;
    c.share_embeddings = true;
    c.encoder_layers = 2;
    c.decoder_layers = 3;
    c.max_len = 16;
    c.layer.dim = 16;
    c.layer.heads = 4;
    c.layer.ff_dim = 24;
    c.layer.dropout = c.layer.attention_dropout = 0.1;  // must be switched off by eval()
    c.layer.norm_first = norm_first;
    return c;
}

/// Perturbs every parameter so that LayerNorm gains and biases are not trivially 1 and 0.
template <class T>
void perturb(Seq2SeqTransformer<T>& m, std::uint64_t seed) {
    Generator g(seed);
    for (auto& [name, p] : m.named_parameters()) {
        const auto noise = Tensor<T>::randn(p.shape(), g, 0.1);
        p.value().add_(noise);
    }
}

token_batch random_batch(Generator& g, const std::vector<index_t>& lengths, index_t vocab, std::int64_t first_id = 4) {
    token_batch b;
    b.batch = static_cast<index_t>(lengths.size());
    b.length = *std::max_element(lengths.begin(), lengths.end());
    b.ids.assign(static_cast<std::size_t>(b.batch * b.length), 0);
    b.segments.assign(b.ids.size(), 0);
    b.lengths = lengths;
    for (index_t i = 0; i < b.batch; ++i)
        for (index_t t = 0; t < lengths[i]; ++t)
            b.ids[i * b.length + t] = first_id + static_cast<std::int64_t>(g.below(static_cast<std::uint64_t>(vocab - first_id)));
    return b;
}

/// log p(tokens + EOS | src) under the full (teacher-forced) decoder.
template <class T>
double teacher_forced_logprob(const Seq2SeqTransformer<T>& m, const token_batch& src, index_t row, const std::vector<std::int64_t>& tokens,
                              std::int64_t bos, std::int64_t eos) {
    no_grad guard;
    const std::vector<std::vector<std::int64_t>> one_src{std::vector<std::int64_t>(src.ids.begin() + row * src.length,
                                                                                   src.ids.begin() + row * src.length + src.lengths[row])};
    const token_batch s = make_source_batch(one_src, -1);
    token_batch tgt;
    tgt.batch = 1;
    tgt.length = static_cast<index_t>(tokens.size()) + 1;
    tgt.ids.push_back(bos);
    tgt.ids.insert(tgt.ids.end(), tokens.begin(), tokens.end());
    tgt.segments.assign(tgt.ids.size(), 0);
    tgt.lengths = {tgt.length};
    const auto logp = log_softmax(m.decode(m.encode(s), s, tgt)).value();
    double total = 0;
    for (index_t t = 0; t < tgt.length; ++t) total += logp(0, t, t < tgt.length - 1 ? tokens[static_cast<std::size_t>(t)] : eos);
    return total;
}

}  // namespace

TEST_CASE("decoding: the cached step-by-step decoder gives the full decoder's logits") {
    for (const bool norm_first : {false, true}) {
        for (const std::string ablated : {"", "decoder.1.self_attention", "decoder.2.cross_attention"}) {
            CAPTURE(norm_first);
            CAPTURE(ablated);
            Seq2SeqTransformer<double> model(decoding_config(norm_first), 3);
            perturb(model, 4);
            for (auto& [name, r] : sublayers(model))
                if (name == ablated) r->enabled = false;
            model.eval();
            no_grad guard;
            Generator g(5);
            const token_batch src = random_batch(g, {5, 7, 3}, 23);
            const index_t T_ = 9;
            token_batch tgt = random_batch(g, {T_, T_, T_}, 23);
            for (index_t b = 0; b < 3; ++b) tgt.ids[b * T_] = 2;  // BOS
            const auto memory = model.encode(src);
            const auto full = model.decode(memory, src, tgt).value();  // (3, T, V)

            decoder_state<double> st(model, memory, src.lengths, 1, T_);
            double worst = 0;
            for (index_t t = 0; t < T_; ++t) {
                std::vector<std::int64_t> ids;
                for (index_t b = 0; b < 3; ++b) ids.push_back(tgt.ids[b * T_ + t]);
                const auto step = st.step(ids);  // (3, V)
                REQUIRE(step.shape() == Shape{3, 23});
                for (index_t b = 0; b < 3; ++b)
                    for (index_t v = 0; v < 23; ++v) {
                        const double d = std::abs(step(b, v) - full(b, t, v));
                        if (!(d <= worst)) worst = d;  // a NaN sticks
                    }
            }
            MESSAGE("norm_first ", norm_first, ", ablated '", ablated, "': largest logit difference ", worst);
            CHECK(worst < 1e-10);
        }
    }
}

TEST_CASE("decoding: select_rows reorders and drops rows of the cache") {
    Seq2SeqTransformer<double> model(decoding_config(false), 8);
    perturb(model, 9);
    model.eval();
    no_grad guard;
    Generator g(10);
    const token_batch src = random_batch(g, {6, 4}, 23);
    const auto memory = model.encode(src);
    // two copies per sentence; rows 0,1 -> sentence 0, rows 2,3 -> sentence 1
    decoder_state<double> st(model, memory, src.lengths, 2, 6);
    const std::vector<std::int64_t> prefix0{2, 7, 9}, prefix1{2, 11, 5};
    for (std::size_t t = 0; t < prefix0.size(); ++t) (void)st.step(std::vector<std::int64_t>{prefix0[t], prefix0[t], prefix1[t], prefix1[t]});
    // keep sentence 1 (row 3) and sentence 0 (row 0), swapped
    st.select_rows(std::vector<std::int64_t>{3, 0});
    const auto step = st.step(std::vector<std::int64_t>{8, 12});
    // reference: each sentence alone, full decoder over the whole prefix
    for (int which = 0; which < 2; ++which) {
        const index_t b = which == 0 ? 1 : 0;
        std::vector<std::int64_t> prefix = b == 0 ? prefix0 : prefix1;
        prefix.push_back(which == 0 ? 8 : 12);
        const std::vector<std::vector<std::int64_t>> one{std::vector<std::int64_t>(src.ids.begin() + b * src.length,
                                                                                   src.ids.begin() + b * src.length + src.lengths[b])};
        const token_batch s = make_source_batch(one, -1);
        token_batch tgt{1, static_cast<index_t>(prefix.size()), prefix, std::vector<std::int64_t>(prefix.size(), 0),
                        {static_cast<index_t>(prefix.size())}};
        const auto full = model.decode(model.encode(s), s, tgt).value();
        double worst = 0;
        for (index_t v = 0; v < 23; ++v) {
            const double d = std::abs(step(which, v) - full(0, tgt.length - 1, v));
            if (!(d <= worst)) worst = d;  // a NaN sticks
        }
        CHECK(worst < 1e-10);
    }
    CHECK_THROWS_WITH_AS(st.select_rows(std::vector<std::int64_t>{2}), Contains("row 2 of 2"), index_error);
}

TEST_CASE("decoding: beam size 1 is greedy; beam scores are the teacher-forced log-probabilities") {
    Seq2SeqTransformer<double> model(decoding_config(false), 12);
    perturb(model, 13);
    model.eval();
    Generator g(14);
    const token_batch src = random_batch(g, {5, 8, 2, 6, 4}, 23);
    search_options o;
    o.max_len_a = 1.0;
    o.max_len_b = 3;
    const auto greedy = generate(model, src, o);
    o.beam = 1;
    Var<double> memory;
    {
        no_grad ng;
        memory = model.encode(src);
    }
    const auto beam1 = beam_search(model, memory, src, o);
    REQUIRE(greedy.size() == 5);
    REQUIRE(beam1.size() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
        CAPTURE(i);
        CHECK(greedy[i].tokens == beam1[i].tokens);
        CHECK(greedy[i].score == doctest::Approx(beam1[i].score).epsilon(1e-12));
        CHECK(greedy[i].finished == beam1[i].finished);
        CHECK(static_cast<index_t>(greedy[i].tokens.size()) + 1 <= output_limit(o, src.lengths[i], 16));
    }
    for (const auto pen : {length_penalty::gnmt, length_penalty::power, length_penalty::none}) {
        o.beam = 4;
        o.penalty = pen;
        o.alpha = pen == length_penalty::power ? 1.0 : 0.6;
        const auto beam = generate(model, src, o);
        REQUIRE(beam.size() == 5);
        for (std::size_t i = 0; i < 5; ++i) {
            CAPTURE(i);
            const double tf = teacher_forced_logprob(model, src, static_cast<index_t>(i), beam[i].tokens, o.bos_id, o.eos_id);
            CHECK(std::abs(beam[i].score - tf) < 1e-9);
            CHECK(beam[i].normalised_score ==
                  doctest::Approx(beam[i].score / length_normaliser(o, static_cast<index_t>(beam[i].tokens.size()) + 1)));
            CHECK(static_cast<index_t>(beam[i].tokens.size()) + 1 <= output_limit(o, src.lengths[i], 16));
            if (pen == length_penalty::none) CHECK(beam[i].score >= greedy[i].score - 1e-9);  // raw log-prob: the beam never loses to greedy
        }
    }
}

TEST_CASE("decoding: a batch decodes as its sentences alone; beams of one sentence share its memory") {
    Seq2SeqTransformer<double> model(decoding_config(false), 21);
    perturb(model, 22);
    model.eval();
    Generator g(23);
    const token_batch src = random_batch(g, {6, 2, 7, 4}, 23);
    for (const int beam : {1, 3}) {
        search_options o;
        o.beam = beam;
        o.max_len_a = 1.0;
        o.max_len_b = 2;
        const auto together = generate(model, src, o);
        for (index_t i = 0; i < src.batch; ++i) {
            CAPTURE(beam);
            CAPTURE(i);
            const std::vector<std::vector<std::int64_t>> one{std::vector<std::int64_t>(src.ids.begin() + i * src.length,
                                                                                       src.ids.begin() + i * src.length + src.lengths[i])};
            const auto alone = generate(model, make_source_batch(one, -1), o);
            CHECK(alone[0].tokens == together[static_cast<std::size_t>(i)].tokens);
            CHECK(std::abs(alone[0].score - together[static_cast<std::size_t>(i)].score) < 1e-9);
        }
    }
    // reordering beams within a sentence keeps the rows' sentences; dropping one changes them
    no_grad guard;
    decoder_state<double> st(model, model.encode(src), src.lengths, 2, 5);
    (void)st.step(std::vector<std::int64_t>(8, 2));
    st.select_rows(std::vector<std::int64_t>{1, 1, 2, 3, 5, 4, 7, 6});
    CHECK(st.row_sentences() == std::vector<std::int64_t>{0, 0, 1, 1, 2, 2, 3, 3});
    st.select_rows(std::vector<std::int64_t>{6, 7, 0, 1});
    CHECK(st.row_sentences() == std::vector<std::int64_t>{3, 3, 0, 0});
    CHECK(st.rows() == 4);
    CHECK_THROWS_WITH_AS(st.select_rows(std::vector<std::int64_t>(9, 0)), Contains("more than the 8 allocated"), usage_error);
}

TEST_CASE("decoding: usage errors") {
    Seq2SeqTransformer<double> model(decoding_config(false), 1);
    Generator g(2);
    const token_batch src = random_batch(g, {3}, 23);
    CHECK_THROWS_WITH_AS(generate(model, src), Contains("model.eval()"), usage_error);
    model.eval();
    search_options o;
    o.beam = 0;
    CHECK_THROWS_WITH_AS(generate(model, src, o), Contains("beam 0"), usage_error);
    o.beam = 1;
    o.eos_id = 99;
    CHECK_THROWS_WITH_AS(generate(model, src, o), Contains("outside the vocabulary"), index_error);
    const auto memory = model.encode(src);  // grad mode on
    CHECK_THROWS_WITH_AS(decoder_state<double>(model, memory, src.lengths, 1, 4), Contains("no_grad"), usage_error);
}

TEST_CASE("decoding: greedy and beam search solve the reverse task") {
    Seq2SeqTransformer<float> model(depthlab_test::tiny_seq2seq(12, 16, 32, 4, 64), 7);
    Generator gen(11);
    (void)depthlab_test::train_reverse_task(model, gen);
    model.eval();
    const auto b = data::reverse_task_batch(gen, 100, 6, 12);  // ids: 0 pad, 1 BOS, 2 EOS
    for (const int beam : {1, 4}) {
        search_options o;
        o.beam = beam;
        o.bos_id = 1;
        o.eos_id = 2;
        o.max_len_a = 1.0;
        o.max_len_b = 3;
        const auto hyps = generate(model, b.src, o);
        int right = 0;
        for (index_t i = 0; i < 100; ++i) {
            std::vector<std::int64_t> want(b.src.ids.begin() + i * b.src.length, b.src.ids.begin() + i * b.src.length + b.src.lengths[i]);
            std::reverse(want.begin(), want.end());
            right += hyps[static_cast<std::size_t>(i)].tokens == want && hyps[static_cast<std::size_t>(i)].finished;
        }
        MESSAGE("reverse task, beam ", beam, ": ", right, " of 100 sequences exactly right");
        CHECK(right >= 95);
    }
}
