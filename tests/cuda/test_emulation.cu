// The emulated CUDA device itself (depthlab_tests_cuda_emu only): the behaviours that make a
// backend bug fail here instead of passing by luck.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "../harness.hpp"

#include <depthlab_cuda_emulation.hpp>

using namespace depthlab;
using cuda_tensor = Tensor<float, backend::cuda>;

namespace {

__global__ void broadcast_thread0(float* out, bool with_barrier) {
    __shared__ float value;
    if (threadIdx.x == 0) value = 42.0f;
    if (with_barrier) __syncthreads();
    out[threadIdx.x] = value;
}
__global__ void broadcast_without_barrier(float* out, bool) {
    __shared__ float value;  // (its own: never written before this kernel)
    if (threadIdx.x == 0) value = 42.0f;
    out[threadIdx.x] = value;  // a missing __syncthreads()
}
__global__ void barrier_in_branch(float* out) {
    if (threadIdx.x < 16) __syncthreads();  // not reached by every thread: an error
    out[threadIdx.x] = 1.0f;
}
__global__ void warp_sum(float* out) {
    float v = static_cast<float>(threadIdx.x);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) out[threadIdx.x / 32] = v;
}

std::vector<float> run(void (*kernel)(float*, bool), bool flag, int threads) {
    float* d = nullptr;
    REQUIRE(cudaMalloc(&d, sizeof(float) * threads) == cudaSuccess);
    DEPTHLAB_CUDA_LAUNCH(kernel, 1, threads, 0, nullptr)(d, flag);
    std::vector<float> h(threads);
    REQUIRE(cudaMemcpy(h.data(), d, sizeof(float) * threads, cudaMemcpyDeviceToHost) == cudaSuccess);
    cudaFree(d);
    return h;
}

}  // namespace

TEST_CASE("cuda emulation: shared memory and barriers are real (a missing barrier reads a stale value)") {
    const auto with = run(broadcast_thread0, true, 64);
    CHECK(std::all_of(with.begin(), with.end(), [](float v) { return v == 42.0f; }));
    // threads run in reverse order between barriers: without the barrier, threads 63..1 read
    // `value` before thread 0 writes it
    const auto without = run(broadcast_without_barrier, false, 64);
    CHECK(without[0] == 42.0f);
    CHECK(without[63] != 42.0f);
    float* d = nullptr;
    REQUIRE(cudaMalloc(&d, sizeof(float) * 64) == cudaSuccess);
    DEPTHLAB_CUDA_LAUNCH(barrier_in_branch, 1, 32, 0, nullptr)(d);
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);  // "__syncthreads() reached by ..."
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
    float* w = nullptr;
    REQUIRE(cudaMalloc(&w, sizeof(float) * 2) == cudaSuccess);
    DEPTHLAB_CUDA_LAUNCH(warp_sum, 1, 64, 0, nullptr)(w);
    std::vector<float> sums(2);
    REQUIRE(cudaMemcpy(sums.data(), w, sizeof(float) * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(sums[0] == 496.0f);          // 0 + ... + 31
    CHECK(sums[1] == 496.0f + 1024.0f);  // 32 + ... + 63
    cudaFree(d);
    cudaFree(w);
}

TEST_CASE("cuda emulation: work waits for a synchronisation, and an event says so") {
    float* d = nullptr;
    REQUIRE(cudaMalloc(&d, sizeof(float) * 32) == cudaSuccess);
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
    cudaEvent_t e = nullptr;
    REQUIRE(cudaEventCreate(&e) == cudaSuccess);
    DEPTHLAB_CUDA_LAUNCH(broadcast_thread0, 1, 32, 0, s)(d, true);
    REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
    CHECK(cudaEventQuery(e) == cudaErrorNotReady);
    CHECK(cudaEventSynchronize(e) == cudaSuccess);
    CHECK(cudaEventQuery(e) == cudaSuccess);
    cudaEventDestroy(e);
    cudaStreamDestroy(s);
    // a host read of device memory outside the device's work faults, and says what it read
    // (in a child process, whose stderr comes back through a pipe)
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t child = fork();
    if (child == 0) {
        dup2(fds[1], 2);
        (void)!std::freopen("/dev/null", "w", stdout);
        depthlab_emulation::install_fault_handler();  // (doctest's own replaced it for this test case)
        volatile float v = d[0];
        (void)v;
        _exit(0);  // (not reached when the guard works)
    }
    close(fds[1]);
    std::string said;
    char buf[512];
    for (ssize_t got; (got = read(fds[0], buf, sizeof buf)) > 0;) said.append(buf, static_cast<std::size_t>(got));
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    CHECK(said.find("the host touched emulated device memory") != std::string::npos);
    cudaFree(d);
}

TEST_CASE("cuda emulation: cudaFree and cudaDeviceSynchronize wait for the work queued on every stream") {
    // (CUDA documents both as synchronising the device: a kernel queued before a free runs
    // before the memory goes, which the backend's caching allocator relies on when it trims)
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
    float *d = nullptr, *out = nullptr;
    REQUIRE(cudaMalloc(&d, sizeof(float) * 32) == cudaSuccess);
    REQUIRE(cudaMalloc(&out, sizeof(float) * 32) == cudaSuccess);
    DEPTHLAB_CUDA_LAUNCH(broadcast_thread0, 1, 32, 0, s)(d, true);
    cudaEvent_t e = nullptr;
    REQUIRE(cudaEventCreate(&e) == cudaSuccess);
    REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
    CHECK(cudaFree(d) == cudaSuccess);  // the kernel writing d ran first (else: a fault in it)
    CHECK(cudaEventQuery(e) == cudaSuccess);
    DEPTHLAB_CUDA_LAUNCH(broadcast_thread0, 1, 32, 0, s)(out, true);
    REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaEventQuery(e) == cudaSuccess);
    std::vector<float> h(32);
    REQUIRE(cudaMemcpy(h.data(), out, sizeof(float) * 32, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(h[31] == 42.0f);
    cudaEventDestroy(e);
    cudaStreamDestroy(s);
    cudaFree(out);
}

TEST_CASE("cuda emulation: cuBLAS checks its arguments as documented and the operands' extents") {
    cublasHandle_t h = nullptr;
    REQUIRE(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    float *a = nullptr, *b = nullptr, *c = nullptr;
    REQUIRE(cudaMalloc(&a, sizeof(float) * 6) == cudaSuccess);
    REQUIRE(cudaMalloc(&b, sizeof(float) * 6) == cudaSuccess);
    REQUIRE(cudaMalloc(&c, sizeof(float) * 4) == cudaSuccess);
    const float one = 1, zero = 0;
    // C (2x2) = A (2x3) B (3x2), column-major: lda 2 is right, lda 1 < m is refused
    CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a, 2, 0, b, 3, 0, &zero, c, 2, 0, 1) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a, 1, 0, b, 3, 0, &zero, c, 2, 0, 1) == CUBLAS_STATUS_INVALID_VALUE);
    // a batch stride that runs past A's allocation: a GPU would read out of bounds
    CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a, 2, 4096, b, 3, 0, &zero, c, 2, 0, 2) ==
          CUBLAS_STATUS_EXECUTION_FAILED);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    // the pointer-array form: the arrays live in device memory and are read when the work
    // runs; a matrix that is not inside an allocation fails the work, naming it
    const float** ptrs = nullptr;
    REQUIRE(cudaMalloc(&ptrs, sizeof(float*) * 6) == cudaSuccess);
    const std::vector<const float*> good{a, a, b, b, c, c}, bad{a, a + 4, b, b, c, c};  // A of matrix 1 reaches past a's 6 floats
    for (const auto* table : {&good, &bad}) {
        REQUIRE(cudaMemcpy(ptrs, table->data(), sizeof(float*) * 6, cudaMemcpyHostToDevice) == cudaSuccess);
        CHECK(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, ptrs, 2, ptrs + 2, 3, &zero, const_cast<float* const*>(ptrs + 4), 2,
                                 2) == CUBLAS_STATUS_SUCCESS);
        CHECK(cudaDeviceSynchronize() == (table == &good ? cudaSuccess : cudaErrorLaunchFailure));
    }
    CHECK(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, ptrs, 1, ptrs + 2, 3, &zero, const_cast<float* const*>(ptrs + 4), 2, 2) ==
          CUBLAS_STATUS_INVALID_VALUE);
    cudaFree(ptrs);
    cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
}

TEST_CASE("cuda emulation: a failed allocation and a failed launch become device_error naming them") {
    depthlab_emulation::fail_next_allocations(2);  // (the allocator retries once)
    memory<backend::cuda>::release_cached();
    CHECK_THROWS_WITH_AS((void)cuda_tensor::zeros({1 << 20}), doctest::Contains("out of device memory"), device_error);
    depthlab_emulation::fail_next_launch();
    CHECK_THROWS_WITH_AS((void)cuda_tensor::zeros({8}), doctest::Contains("fill"), device_error);
    depthlab_emulation::reset_counters();
    const auto t = cuda_tensor::full({1000}, 2.0f);
    CHECK(t.to_host()[999] == 2.0f);
    CHECK(depthlab_emulation::counters().kernels == 1);
    CHECK(depthlab_emulation::counters().downloads == 1);
}

TEST_CASE("cuda emulation: a kernel's fault keeps its name; DEPTHLAB_CUDA_SYNC=1 names the kernel and its grid") {
    // asynchronous, as on a GPU: the launch returns, the next synchronisation reports the fault
    // by its name, and so does an allocation after it (not "out of device memory")
    memory<backend::cuda>::release_cached();
    depthlab_emulation::fault_next_kernel();
    (void)cuda_tensor::full({100}, 1.0f);
    CHECK_THROWS_WITH_AS(cuda::synchronize(), doctest::Contains("cudaErrorIllegalAddress"), device_error);
    CHECK_THROWS_WITH_AS((void)cuda_tensor::zeros({12345}), doctest::Contains("cudaErrorIllegalAddress (an illegal memory access was encountered): an earlier kernel faulted"),
                         device_error);
    depthlab_emulation::clear_sticky_error();
    // with DEPTHLAB_CUDA_SYNC=1 the launch that faulted says so
    setenv("DEPTHLAB_CUDA_SYNC", "1", 1);
    depthlab_emulation::fault_next_kernel();
    CHECK_THROWS_WITH_AS((void)cuda_tensor::full({100}, 1.0f), doctest::Contains("kernel fill (grid 1, block 256) failed: cudaErrorIllegalAddress"),
                         device_error);
    unsetenv("DEPTHLAB_CUDA_SYNC");
    depthlab_emulation::clear_sticky_error();
    memory<backend::cuda>::release_cached();
}
