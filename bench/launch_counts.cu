// depthlab_launch_counts: what one training step asks of a CUDA device — kernel launches
// (GEMM calls included), GEMM calls and host synchronisations — for the two steps the GPU
// work is designed around (bench/device_steps.hpp). Built with -DDEPTHLAB_CUDA_EMULATION=ON
// (g++, the emulated device: counts, not times) and, with -DDEPTHLAB_WITH_CUDA=ON, by nvcc.
//
//   depthlab_launch_counts            prints one line per step:
//     dense_layer_train_d256 launches=N gemms=G syncs=S
//     act_train_step_60pct launches=N gemms=G syncs=S
#include <cstdio>
#include <exception>

#include <depthlab/backend_free.hpp>
#include <depthlab/backend/cuda/cuda.cuh>

#include "device_steps.hpp"

int main() {
    using depthlab::backend::cuda;
    try {
        if (depthlab::cuda::device_count() == 0) {
            std::puts("depthlab_launch_counts: no CUDA device found");
            return 1;
        }
        const auto dense = depthlab_bench::dense_layer_train_step<cuda>({});
        std::printf("%s\n", depthlab_bench::format_counts("dense_layer_train_d256", dense).c_str());
        const auto act = depthlab_bench::act_train_step<cuda>({});
        std::printf("%s\n", depthlab_bench::format_counts("act_train_step_60pct", act).c_str());
        std::printf("(dense: d256, 4 heads, FF 1024, batch 32 x 128, dropout 0.1, AdamW with clipping; act: the same layer, "
                    "N_max 6, batch 8 x 64, mean depth %.2f of 6, LAMB)\n",
                    act.mean_iterations);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "depthlab_launch_counts: %s\n", e.what());
        return 1;
    }
}
