#pragma once
// The training steps whose device work is counted: by depthlab_launch_counts (the issue's
// shapes, printed) and by tests/cuda/test_cuda_counts.cu (small shapes, pinned). Backend-
// templated: the counts are those of counters<B>() — kernel launches (GEMM calls included),
// GEMM calls, and host synchronisations (device-to-host reads).
#include <cstdint>
#include <string>
#include <vector>

namespace depthlab_bench {

/// What one step asked of the device.
struct step_counts {
    std::int64_t launches = 0, gemms = 0, syncs = 0;
    double mean_iterations = 0;  // ACT: mean per-token depth of the counted step
};

/// The post-LN GELU layer both steps train (BERT initialisation).
inline depthlab::nn::transformer_config step_layer(depthlab::index_t dim, depthlab::index_t heads, depthlab::index_t ff, double dropout,
                                                  double ln_eps) {
    return {.dim = dim, .heads = static_cast<int>(heads), .ff_dim = ff, .act = depthlab::nn::activation::gelu, .dropout = dropout,
            .attention_dropout = dropout, .norm_first = false, .ln_eps = ln_eps, .init = depthlab::nn::init_scheme::bert};
}

/// Runs `step` twice and returns the second run's counts (the first allocates the optimiser
/// state); `step` returns the ACT mean depth (0 for a dense step).
template <class B, class Step>
step_counts count_second_step(Step&& step) {
    auto& k = depthlab::counters<B>();
    step_counts out;
    for (int run = 0; run < 2; ++run) {
        k.reset();
        const double depth = step();
        out = {k.launches.load(), k.gemms.load(), k.syncs.load(), depth};
    }
    return out;
}

struct dense_step_shape {
    depthlab::index_t dim = 256, heads = 4, ff = 1024, batch = 32, seq = 128;
};

/// One post-LN encoder-layer training step: forward (GELU, dropout 0.1 on the residual
/// branches and the attention probabilities), MSE loss, backward, gradient clipping on the
/// device, AdamW.
template <class B>
step_counts dense_layer_train_step(const dense_step_shape& s) {
    using namespace depthlab;
    Generator g(11);
    nn::EncoderLayer<float, B> layer(step_layer(s.dim, s.heads, s.ff, 0.1, 1e-5), g);
    optim::AdamW<float, B> opt(layer.named_parameters(), {.lr = 1e-3});
    Generator gx(3);
    const auto x = Tensor<float, B>::randn({s.batch, s.seq, s.dim}, gx);
    const auto target = Tensor<float, B>::randn({s.batch, s.seq, s.dim}, gx);
    return count_second_step<B>([&] {
        opt.zero_grad();
        const auto y = layer(Var<float, B>::constant(x));
        const auto loss = mse(y, Var<float, B>::constant(target));
        loss.backward();
        optim::clip_grad_norm_on_device(opt.parameters(), 1.0);
        opt.step();
        return 0.0;
    });
}

struct act_step_shape {
    depthlab::index_t dim = 256, heads = 4, ff = 1024, batch = 8, seq = 64;
    int max_iterations = 6;
};

/// One ACT encoder training step (the ACT-ALBERT tiny layer: d256, 4 heads, FF 1024, N_max 6,
/// compact path) at the benchmarks' ~60% halted profile (halting bias -0.6 on random
/// inputs): forward, sum of the hidden states plus the ponder cost, backward, LAMB. The loss
/// is not read back (a training loop reads it every log interval, not every step).
template <class B>
step_counts act_train_step(const act_step_shape& s) {
    using namespace depthlab;
    Generator g(1);
    halting::ActEncoder<float, B, halting::act> enc(step_layer(s.dim, s.heads, s.ff, 0.0, 1e-12), g, {.max_iterations = s.max_iterations});
    enc.halting_unit->bias.value().fill_(-0.6f);
    optim::Lamb<float, B> opt(enc.named_parameters(), {.lr = 1e-3});
    Generator gx(5);
    const auto x = Tensor<float, B>::uniform({s.batch, s.seq, s.dim}, gx, -1, 1);
    const std::vector<index_t> lengths(static_cast<std::size_t>(s.batch), s.seq);
    return count_second_step<B>([&] {
        opt.zero_grad();
        auto r = enc(Var<float, B>::constant(x), lengths);
        const auto loss = add(sum(r.hidden), scale(r.ponder, 1e-3f));
        loss.backward();
        opt.step();
        double n = 0;
        for (int v : r.record.N) n += v;
        return n / static_cast<double>(r.record.N.size());
    });
}

inline std::string format_counts(const std::string& name, const step_counts& c) {
    return name + " launches=" + std::to_string(c.launches) + " gemms=" + std::to_string(c.gemms) + " syncs=" + std::to_string(c.syncs);
}

}  // namespace depthlab_bench
