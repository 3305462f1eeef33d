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
#include "depthlab/backend/cuda/memory.cuh"
#include "depthlab/backend/cuda/primitives.cuh"
#include "depthlab/backend/cuda/runtime.cuh"
