#pragma once
// --device: the backend of an example, chosen once at the top of main. The job is a generic
// lambda over the backend tag, so the same code trains on the CPU or on a GPU:
//
//     return examples::on_device(device, "train_tiny", [&](auto tag) { return run<decltype(tag)>(opts); });
//
//   cpu          the CPU backend (oneDNN + the AVX2/AVX-512 kernels)
//   cuda         an NVIDIA GPU (a build with -DDEPTHLAB_WITH_CUDA=ON, which links depthlab::cuda)
//   host_device  the CPU kernels behind a device interface (no element access, counted
//                launches and syncs): results equal the CPU's bit for bit, so it checks on
//                any machine that the example's code path is device-clean
#include <cstdio>
#include <string>

#include <depthlab/depthlab.hpp>
#if defined(DEPTHLAB_HAVE_CUDA)
#include <depthlab/backend/cuda/cuda.hpp>
#endif

namespace examples {

inline constexpr const char* device_help = "cpu | cuda (an NVIDIA GPU; needs -DDEPTHLAB_WITH_CUDA=ON) | host_device (check backend)";
inline constexpr const char* precision_help =
    "GEMM inputs: auto (bf16 on a GPU with bf16 tensor cores, sm_80+, or a CPU that multiplies bf16 natively; else f32) | f32 | "
    "bf16 (bf16 inputs, f32 accumulation; weights, optimiser state, softmax, layer norm and losses stay f32)";

/// --precision: sets the process-wide matmul precision (backend/precision.hpp) for the
/// device the job runs on, and returns it. auto means bf16 where that device multiplies bf16
/// fast: a CUDA GPU of sm_80 or newer, or a CPU with AVX512_BF16 or AMX.
inline depthlab::matmul_precision use_precision(const std::string& flag, const std::string& device) {
    depthlab::matmul_precision p = depthlab::parse_matmul_precision(flag);
#if defined(DEPTHLAB_HAVE_CUDA)
    if (flag == "auto" && device == "cuda")
        p = depthlab::cuda::has_bf16_tensor_cores() ? depthlab::matmul_precision::bf16 : depthlab::matmul_precision::f32;
#else
    (void)device;
#endif
    depthlab::set_matmul_precision(p);
    return p;
}
/// The precision as the start-up line prints it, e.g. "bf16 (native)".
inline std::string precision_description(const std::string& backend) {
    const auto p = depthlab::active_matmul_precision();
    std::string s = depthlab::to_string(p);
    if (backend == "cuda") return s + (p == depthlab::matmul_precision::bf16 ? " (cuBLAS, bf16 tensor cores)" : " (cuBLAS, fp32)");
    if (p == depthlab::matmul_precision::bf16) s += depthlab::cpu_has_native_bf16() ? " (native)" : " (emulated: no AVX512_BF16 on this CPU)";
    return s;
}

/// Runs job(backend tag) on the named device; exit code 2 with one line for a bad name, a
/// build without CUDA or a machine without a GPU.
template <class Job>
int on_device(const std::string& device, const char* program, Job&& job) {
    namespace backend = depthlab::backend;
    if (device == "cpu") return job(backend::cpu{});
    if (device == "host_device") return job(backend::host_device{});
    if (device == "cuda") {
#if defined(DEPTHLAB_HAVE_CUDA)
        if (depthlab::cuda::device_count() == 0) {
            std::fprintf(stderr, "%s: --device cuda: no CUDA device found (driver or GPU missing)\n", program);
            return 2;
        }
        std::printf("%s: device %s\n", program, depthlab::cuda::device_description().c_str());
        return job(backend::cuda{});
#else
        std::fprintf(stderr, "%s: --device cuda: this build has no CUDA backend (configure with -DDEPTHLAB_WITH_CUDA=ON)\n", program);
        return 2;
#endif
    }
    std::fprintf(stderr, "%s: --device: expected cpu, cuda or host_device, got '%s'\n", program, device.c_str());
    return 2;
}

/// One line on memory: the process's peak RSS and the CPU tensors' peak working set; with
/// oneDNN, a second on the GEMM primitives made (a cache too small for a run's shapes shows
/// as many made, each costing a JIT compilation).
inline std::string memory_summary() {
    char buf[320];
    int n = std::snprintf(buf, sizeof buf, "memory: peak RSS %.0f MiB; CPU tensors at most %.0f MiB at once",
                          depthlab::memory<depthlab::backend::cpu>::peak_rss_mib(),
                          static_cast<double>(depthlab::memory<depthlab::backend::cpu>::peak_bytes()) / (1 << 20));
#if defined(DEPTHLAB_HAVE_ONEDNN)
    const auto& cache = depthlab::cpu::onednn::primitive_cache::instance();
    if (cache.made() > 0 && n > 0 && n < static_cast<int>(sizeof buf))
        std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), "\nGEMM primitives: %zu made in %.1f s (cache of %zu)", cache.made(),
                      cache.making_seconds(), cache.capacity());
#endif
    return buf;
}

}  // namespace examples
