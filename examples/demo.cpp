// demo: the smallest end-to-end use of depthlab's core — a 2-layer MLP trained with plain
// SGD on two interleaved spirals, with a progress line (loss, accuracy, samples/s, ETA).
//   build/examples/demo [--steps N] [--hidden H] [--lr LR] [--seed S] [--device cpu|cuda]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <depthlab/depthlab.hpp>

#include "common/cli.hpp"
#include "common/device.hpp"

using namespace depthlab;

struct options {
    int steps = 600, hidden = 64, batch = 256;
    float lr = 0.3f;
    std::uint64_t seed = 1;
    std::string device = "cpu", out = "runs/spirals";
};

/// The job on backend B: parameters, activations and the SGD update live there.
template <class B>
int run(const options& o) {
    using V = Var<float, B>;
    using Tn = Tensor<float, B>;
    const int steps = o.steps, hidden = o.hidden, batch = o.batch;
    const float lr = o.lr;
    std::printf("depthlab %s demo: 2-layer MLP on two spirals (device %s, ISA %s, %d threads)\n", version_string(), B::name,
                cpu::to_string(cpu::active_isa()), max_threads());

    Generator gen(o.seed);
    // data: two spirals, 2-D points, label = arm
    auto make_batch = [&](int n, std::vector<float>& x, std::vector<std::int64_t>& y) {
        x.resize(2 * n);
        y.resize(n);
        for (int i = 0; i < n; ++i) {
            const int arm = static_cast<int>(gen.below(2));
            const double t = 0.5 + 3.0 * gen.uniform();
            const double ang = t * 2.2 + arm * M_PI;
            x[2 * i] = static_cast<float>(t * std::cos(ang) / 3.5 + 0.03 * gen.normal());
            x[2 * i + 1] = static_cast<float>(t * std::sin(ang) / 3.5 + 0.03 * gen.normal());
            y[i] = arm;
        }
    };
    auto W1 = V::parameter(Tn::randn({hidden, 2}, gen, std::sqrt(2.0 / 2)));
    auto b1 = V::parameter(Tn::zeros({hidden}));
    auto W2 = V::parameter(Tn::randn({hidden, hidden}, gen, std::sqrt(2.0 / hidden)));
    auto b2 = V::parameter(Tn::zeros({hidden}));
    auto W3 = V::parameter(Tn::randn({2, hidden}, gen, std::sqrt(1.0 / hidden)));
    auto b3 = V::parameter(Tn::zeros({2}));
    const std::vector<V> params{W1, b1, W2, b2, W3, b3};
    auto forward = [&](const V& x) { return linear(gelu(linear(gelu(linear(x, W1, b1)), W2, b2)), W3, b3); };

    std::vector<float> xs;
    std::vector<std::int64_t> ys;
    const auto start = std::chrono::steady_clock::now();
    double loss_avg = 0;
    for (int step = 1; step <= steps; ++step) {
        make_batch(batch, xs, ys);
        auto x = V::constant(Tn::from({batch, 2}, xs));
        auto loss = cross_entropy(forward(x), ys);
        for (auto& p : params) p.zero_grad();
        loss.backward();
        {
            no_grad guard;
            for (auto& p : params) primitives<B>::axpby(p.value().numel(), -lr, p.grad().data(), 1.0f, p.value().data());
        }
        const double l = checked_item(loss);  // one read per step: the printed loss
        loss_avg = step == 1 ? l : 0.95 * loss_avg + 0.05 * l;
        if (step % 100 == 0 || step == steps) {
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::printf("step %5d/%d  loss %.4f  %.0f samples/s  ETA %.1fs\n", step, steps, loss_avg, step * batch / secs,
                        secs / step * (steps - step));
            std::fflush(stdout);
        }
    }
    // held-out accuracy
    make_batch(4000, xs, ys);
    no_grad guard;
    const auto logits = forward(V::constant(Tn::from({4000, 2}, xs))).value().template to<backend::cpu>();
    int correct = 0;
    for (int i = 0; i < 4000; ++i) correct += (logits(i, 1) > logits(i, 0) ? 1 : 0) == ys[i];
    std::printf("held-out accuracy: %.1f%% (4000 points)\n", 100.0 * correct / 4000);
    return 0;
}

int main(int argc, char** argv) {
    options o;
    examples::cli args("demo", "A 2-layer MLP trained with plain SGD on two interleaved spirals.");
    args.section("Model")
        .option("hidden", o.hidden, "hidden width").range(1, 1 << 16)
        .section("Optimisation")
        .option("steps", o.steps, "SGD steps").range(1, 1000000000)
        .option("lr", o.lr, "learning rate").positive()
        .option("seed", o.seed, "random seed")
        .section("Output")
        .option("out", o.out, "output directory (config.toml)")
        .section("Device")
        .option("device", o.device, examples::device_help).one_of({"cpu", "cuda", "host_device"});
    args.parse(argc, argv);
    args.save_config(o.out);
    return examples::on_device(o.device, "demo", [&](auto tag) { return run<decltype(tag)>(o); });
}
