#pragma once
// DEPTHLAB_HOST_AND_GPU marks an inline function that both the host compiler and nvcc compile
// (__host__ __device__ under nvcc): math that is the same on the CPU and the GPU is written
// once, and the CPU tests cover the code the CUDA kernels run. (It has nothing to do with
// backend::host_device, the counting host backend.)
#if defined(__CUDACC__)
#define DEPTHLAB_HOST_AND_GPU __host__ __device__
#else
#define DEPTHLAB_HOST_AND_GPU
#endif
/// Deprecated: the former name of DEPTHLAB_HOST_AND_GPU, kept for one release.
#define DEPTHLAB_HD DEPTHLAB_HOST_AND_GPU
