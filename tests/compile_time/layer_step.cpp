// The compile-time probe (docs/compile-time.md, scripts/compile-time): a user's smallest
// training program, one encoder layer's step (forward, a loss, backward, AdamW) and the loss.
#include <depthlab/depthlab.hpp>

#include <cmath>
#include <iostream>

using namespace depthlab;

int main() {
    Generator gen(0);
    nn::EncoderLayer<float> layer(nn::transformer_config{.dim = 64, .heads = 4, .ff_dim = 256}, gen);
    optim::AdamW<float> opt(layer.named_parameters());
    const auto x = Var<float>::constant(Tensor<float>::randn({2, 16, 64}, gen));  // (batch, tokens, dim)
    const auto y = layer(x);
    auto loss = mean(mul(y, y));
    loss.backward();
    opt.step();
    std::cout << "loss " << loss.value().item() << "\n";
    return std::isfinite(loss.value().item()) ? 0 : 1;
}
