#pragma once
// Shared test helpers: backends under test, tolerance checks, conversions.
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

// The CUDA test programs: depthlab_tests_cuda (nvcc) and depthlab_tests_cuda_emu (g++ against
// the emulated device, -DDEPTHLAB_CUDA_EMULATION=ON) compile these sources for backend::cuda.
#if defined(__CUDACC__) || defined(DEPTHLAB_CUDA_EMULATION)
#define DEPTHLAB_TEST_CUDA 1
#endif

#if defined(DEPTHLAB_TEST_CUDA)
// depthlab_tests_cuda: the same test sources compiled by nvcc against the CUDA backend only
// (nvcc never sees the CPU backend); references are the tests' host loops and fixtures.
#include <depthlab/backend_free.hpp>
#include <depthlab/backend/cuda/cuda.cuh>
#else
#include <depthlab/depthlab.hpp>
#endif

namespace depthlab_test {

using depthlab::index_t;
using depthlab::Shape;

/// The backends every templated test runs on: the CPU and host_device (a backend that is
/// not host-accessible and counts launches and synchronisations); under nvcc, CUDA.
#if defined(DEPTHLAB_TEST_CUDA)
#define DEPTHLAB_TEST_BACKENDS depthlab::backend::cuda
using primary_backend = depthlab::backend::cuda;
#else
#define DEPTHLAB_TEST_BACKENDS depthlab::backend::cpu, depthlab::backend::host_device
using primary_backend = depthlab::backend::cpu;
#endif

/// Largest violation of |a - b| <= atol + rtol * |b| (0 when all close); `where` gets the
/// index of the worst element.
inline double worst_violation(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol,
                              std::size_t* where = nullptr) {
    double worst = 0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
        const double excess = std::abs(a[i] - b[i]) - (atol + rtol * std::abs(b[i]));
        const bool bad = !(std::isfinite(a[i]) == std::isfinite(b[i])) || (std::isnan(a[i]) != std::isnan(b[i]));
        if (bad || excess > worst) {
            worst = bad ? INFINITY : excess;
            if (where) *where = i;
        }
    }
    return worst;
}

/// CHECKs that got ≈ want elementwise, with a message naming what differs and where.
inline void check_close(const std::string& what, const std::vector<double>& got, const std::vector<double>& want, double rtol,
                        double atol) {
    INFO(what);
    REQUIRE(got.size() == want.size());
    std::size_t at = 0;
    const double v = worst_violation(got, want, rtol, atol, &at);
    if (v > 0) {
        std::ostringstream os;
        os << what << ": element " << at << " got " << got[at] << " want " << want[at] << " (rtol " << rtol << ", atol " << atol
           << ")";
        FAIL_CHECK(os.str());
    }
}

template <class T, class B>
std::vector<double> to_double(const depthlab::Tensor<T, B>& t) {
    const auto v = t.to_vector();
    return {v.begin(), v.end()};
}

template <class T, class B>
depthlab::Tensor<T, B> from_double(const Shape& s, const std::vector<double>& v) {
    std::vector<T> c(v.begin(), v.end());
    return depthlab::Tensor<T, B>::from(s, c);
}

/// A tiny encoder-decoder for tests: one joint vocabulary of `vocab` (shared embeddings),
/// 2 encoder + 2 decoder layers, no dropout; everything else the seq2seq_config defaults.
inline depthlab::nn::seq2seq_config tiny_seq2seq(index_t vocab, index_t max_len, index_t dim, int heads, index_t ff_dim) {
    depthlab::nn::seq2seq_config c;
    c.src_vocab = c.tgt_vocab = vocab;
    c.share_embeddings = true;
    c.encoder_layers = c.decoder_layers = 2;
    c.max_len = max_len;
    c.layer.dim = dim;
    c.layer.heads = heads;
    c.layer.ff_dim = ff_dim;
    c.layer.dropout = c.layer.attention_dropout = 0.0;
    return c;
}

/// Two source sentences (lengths 5 and 3, padding id 0) for decoding tests.
inline depthlab::nn::token_batch two_sentence_source() {
    depthlab::nn::token_batch src;
    src.batch = 2;
    src.length = 5;
    src.ids = {3, 4, 5, 6, 7, 8, 9, 10, 0, 0};
    src.lengths = {5, 3};
    return src;
}

/// Trains a model on the reverse task (batches of 32, up to 6 tokens, vocabulary 12) with
/// Adam (lr 3e-3, inverse-sqrt warm-up of 50 steps, clipping at 1); returns the smoothed
/// loss. Warm-up and clipping make the result robust to rounding: constant-lr Adam ended
/// anywhere between 0.02 and 0.2 after 400 steps depending on the compiler and ISA path;
/// this schedule ends below 0.01 on each of g++/clang × scalar/AVX2.
template <class Model>
double train_reverse_task(Model& model, depthlab::Generator& gen, int steps = 600) {
    depthlab::optim::AdamOptions opts;
    opts.lr = 3e-3;
    opts.weight_decay = 0;
    depthlab::optim::Adam<float> adam(model.named_parameters(), opts);
    const depthlab::optim::inverse_sqrt schedule(opts.lr, 50);
    double loss = 0;
    for (int step = 0; step < steps; ++step) {
        const auto b = depthlab::data::reverse_task_batch(gen, 32, 6, 12);
        auto L = depthlab::cross_entropy(model.decode(model.encode(b.src), b.src, b.tgt_in), b.tgt_out);
        adam.zero_grad();
        L.backward();
        depthlab::optim::clip_grad_norm(adam.parameters(), 1.0);
        adam.set_lr(schedule.lr(step + 1));
        adam.step();
        loss = step == 0 ? L.value().item() : 0.9 * loss + 0.1 * L.value().item();
    }
    return loss;
}

#if !defined(DEPTHLAB_TEST_CUDA)
/// Every ISA path this CPU can run (the float kernels are checked on each).
inline std::vector<depthlab::cpu::isa> runnable_isas() {
    std::vector<depthlab::cpu::isa> out;
    for (auto i : {depthlab::cpu::isa::scalar, depthlab::cpu::isa::avx2, depthlab::cpu::isa::avx512})
        if (depthlab::cpu::cpu_supports(i)) out.push_back(i);
    return out;
}
#endif

/// Calls f.template operator()<B>() for every backend B under test, in order.
template <class... Bs>
struct backend_list {};
template <class F, class... Bs>
void for_each_backend_in(F&& f, backend_list<Bs...>) {
    (f.template operator()<Bs>(), ...);
}
template <class F>
void for_each_backend(F&& f) {
    for_each_backend_in(f, backend_list<DEPTHLAB_TEST_BACKENDS>{});
}

/// Calls f(name) once per float code path of backend B: each ISA path the CPU can run
/// (forced for the call) on the host backends, the one path of a device.
template <class B, class F>
void for_each_float_path(F&& f) {
#if defined(DEPTHLAB_TEST_CUDA)
    f(std::string(B::name));
#else
    for (auto isa : runnable_isas()) {
        depthlab::cpu::isa_scope scope(isa);
        f(std::string(depthlab::cpu::to_string(isa)));
    }
#endif
}

}  // namespace depthlab_test
