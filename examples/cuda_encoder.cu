// cuda_encoder: an encoder layer trained on the GPU (backend::cuda), the smallest complete
// CUDA program. nvcc only sees the device-agnostic library and the CUDA backend.
//
//   cmake -B build-cuda -DDEPTHLAB_WITH_CUDA=ON && cmake --build build-cuda --target cuda_encoder
//   build-cuda/examples/cuda_encoder
#include <cstdio>

#include <depthlab/backend_free.hpp>
#include <depthlab/backend/cuda/cuda.cuh>

using namespace depthlab;
using gpu = backend::cuda;

int main() {
    if (cuda::device_count() == 0) {
        std::puts("cuda_encoder: no CUDA device found");
        return 1;
    }
    Generator gen(1);
    nn::EncoderLayer<float, gpu> layer({.dim = 512, .heads = 8, .ff_dim = 2048, .dropout = 0, .attention_dropout = 0}, gen);
    optim::AdamW<float, gpu> opt(layer.named_parameters(), {.lr = 1e-4});
    const auto x = Tensor<float, gpu>::randn({32, 128, 512}, gen);
    const auto target = Tensor<float, gpu>::randn({32, 128, 512}, gen);
    for (int step = 0; step < 100; ++step) {
        opt.zero_grad();
        auto loss = mse(layer(Var<float, gpu>::constant(x)), Var<float, gpu>::constant(target));
        loss.backward();
        optim::clip_grad_norm_on_device(opt.parameters(), 1.0);  // no synchronisation
        opt.step();
        if (step % 10 == 0) std::printf("step %d loss %.4f\n", step, checked_item(loss));  // the one sync of a printed step
    }
    return 0;
}
