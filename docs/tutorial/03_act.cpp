// An ACT encoder: one tied layer iterated with per-token halting (Graves 2016; the
// ACT-ALBERT study). The default options train with dropout: the compact path (running
// tokens only) is used where it applies, the dense path elsewhere, with the same result.
#include <depthlab/depthlab.hpp>

#include <iostream>

using namespace depthlab;

int main() {
    nn::transformer_config layer{.dim = 32, .heads = 4, .ff_dim = 64};  // dropout 0.1 by default
    halting::act_options act{.max_iterations = 6, .halting_bias = -1.0};  // start with more iterations (against collapse)
    Generator gen(3);
    halting::ActEncoder<float> encoder(layer, gen, act);
    optim::Adam<float> adam(encoder.named_parameters(), {.lr = 1e-3});

    const auto x = Var<float>::constant(Tensor<float>::randn({4, 10, 32}, gen));  // (batch, tokens, dim)
    const std::vector<index_t> lengths{10, 7, 5, 2};
    const double tau = 1e-2;
    for (std::int64_t step = 0; step < 20; ++step) {
        adam.zero_grad();
        const auto r = encoder(x, lengths);
        // a task loss (here: keep the states small) plus the ponder cost, ramped up over 10 steps
        auto loss = add(mean(mul(r.hidden, r.hidden)), scale(r.ponder, static_cast<float>(halting::ponder_weight(tau, 10, step))));
        loss.backward();
        adam.step();
    }
    encoder.eval();
    const auto r = encoder(x, lengths);
    std::cout << "iterations per token of sequence 0:";
    for (index_t t = 0; t < 10; ++t) std::cout << " " << r.record.N[static_cast<std::size_t>(t)];
    std::cout << "\nran the compact path in eval mode: " << (r.record.compact ? "yes" : "no") << "\n";
    return r.record.compact && r.record.iterations >= 1 ? 0 : 1;
}
