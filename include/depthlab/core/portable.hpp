#pragma once
// DEPTHLAB_HD marks an inline function that both the host compiler and nvcc compile
// (__host__ __device__ under nvcc): math that is the same on the CPU and the GPU is written
// once, and the CPU tests cover the code the CUDA kernels run.
#if defined(__CUDACC__)
#define DEPTHLAB_HD __host__ __device__
#else
#define DEPTHLAB_HD
#endif
