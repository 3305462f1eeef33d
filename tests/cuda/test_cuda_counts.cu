// backend::cuda: a dense encoder-layer training step (forward, backward, clipping, AdamW)
// launches kernels and makes no host synchronisation; reading the loss is the one sync.
// (Values are checked by the op harness and the PyTorch layer parity, compiled for cuda in
// test_ops.cu and test_layers_parity.cu.)
#include <cstring>

#include "../harness.hpp"

using namespace depthlab;
using cu = backend::cuda;

TEST_CASE("cuda: a dense encoder-layer training step makes no host synchronisation") {
    nn::transformer_config c;
    c.dim = 64;
    c.heads = 4;
    c.ff_dim = 128;
    c.dropout = c.attention_dropout = 0;
    Generator g(11);
    nn::EncoderLayer<float, cu> layer(c, g);
    optim::AdamW<float, cu> opt(layer.named_parameters(), {.lr = 1e-3});
    Generator gx(3);
    const auto x = Tensor<float, cu>::randn({4, 16, 64}, gx);
    const auto target = Tensor<float, cu>::randn({4, 16, 64}, gx);
    const auto mask = nn::padding_mask<float, cu>({16, 9, 4, 1}, 16);
    auto& k = counters<cu>();
    for (int step = 0; step < 3; ++step) {
        k.reset();
        opt.zero_grad();
        const auto y = layer(Var<float, cu>::constant(x), mask);
        const auto loss = mse(y, Var<float, cu>::constant(target));
        loss.backward();
        optim::clip_grad_norm_on_device(opt.parameters(), 1.0);
        opt.step();
        CHECK(k.syncs == 0);
        MESSAGE("cuda dense step: ", k.launches.load(), " launches, ", k.syncs.load(), " syncs");
        const float l = checked_item(loss);
        CHECK(std::isfinite(l));
    }
}
