#pragma once
// The CUDA backend: include this header in a .cu translation unit compiled by nvcc (with
// --extended-lambda), after or instead of depthlab/backend_free.hpp, and use
// backend::cuda as the backend of tensors, models and optimisers:
//
//     #include <depthlab/backend_free.hpp>
//     #include <depthlab/backend/cuda/cuda.cuh>
//     depthlab::nn::EncoderLayer<float, depthlab::backend::cuda> layer(cfg, gen);
//
// nvcc never sees the CPU backend (AVX2/AVX-512 kernels, oneDNN, Eigen): those live in
// backend/cpu/ and are included by depthlab.hpp only. CMake: link depthlab::cuda (built
// with -DDEPTHLAB_WITH_CUDA=ON), which adds CUDA::cudart and CUDA::cublas.
//
// The nvcc flags the sources need (the depthlab::cuda target sets them; a build by hand, as
// scripts/device-check does, passes them itself):
//   -std=c++20                 the library is C++20 (CMake 3.25 cannot ask CUDA 13 for it)
//   --extended-lambda          the kernels are __device__ lambdas handed to launch helpers
//   --expt-relaxed-constexpr   constexpr host functions (std::numeric_limits, ...) in kernels
//   -arch=sm_80 / sm_90        (or CMAKE_CUDA_ARCHITECTURES) Ampere and Hopper
//   -diag-suppress 3189        optional: one front-end remark scripts/device-check silences
// Link with -lcublas (and cudart, nvcc's default). The same sources also compile with g++
// against the emulated device (emulation/cuda, -DDEPTHLAB_CUDA_EMULATION=ON).
#include "depthlab/backend/cuda/memory.cuh"
#include "depthlab/backend/cuda/primitives.cuh"
#include "depthlab/backend/cuda/runtime.cuh"
