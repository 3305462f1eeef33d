#pragma once
// dist::nccl_communicator: the collectives of dist::communicator over NCCL, on CUDA device
// buffers and this thread's stream of backend::cuda, bootstrapped through MPI as HPC codes
// do: rank 0 creates the NCCL unique id and MPI broadcasts it; each rank uses the GPU
// `local rank mod device count` (set here: construct the communicator before anything else
// touches backend::cuda, whose per-thread stream and allocator belong to the device current at
// their first use). One GPU per rank: NCCL refuses two ranks on one device. Build with -DDEPTHLAB_WITH_CUDA=ON -DDEPTHLAB_WITH_NCCL=ON
// (which also needs -DDEPTHLAB_WITH_MPI=ON); link depthlab::nccl.
//
// Failure behaviour as in dist/mpi.hpp: every collective is enqueued, then the host polls the
// stream and ncclCommGetAsyncError until it completes or the timeout passes; then the
// communicator is aborted (ncclCommAbort) and the job ends through MPI_Abort with a message
// naming the collective. Scalars that the trainer reduces on the host (progress values, the
// stop flag) go through the MPI communicator it is built on (host_side()).
#if !defined(DEPTHLAB_HAVE_NCCL) || !defined(DEPTHLAB_HAVE_MPI) || !defined(DEPTHLAB_HAVE_CUDA)
#error "depthlab/dist/nccl.hpp needs CUDA, NCCL and MPI: -DDEPTHLAB_WITH_CUDA=ON -DDEPTHLAB_WITH_NCCL=ON -DDEPTHLAB_WITH_MPI=ON"
#endif
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>

#include "depthlab/backend/cuda/cuda.hpp"
#include "depthlab/dist/mpi.hpp"

namespace depthlab::dist {

class nccl_communicator final : public communicator {
public:
    /// `host`: the MPI communicator of the same ranks (kept by reference; it must outlive this).
    explicit nccl_communicator(mpi_communicator& host) : host_(host) {
        int local_rank = host.rank();
        if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) local_rank = std::atoi(v);
        const int devices = cuda::device_count();
        DEPTHLAB_CHECK(devices > 0, device_error, "dist::nccl: rank ", host.rank(), " sees no CUDA device");
        cuda_check(cudaSetDevice(local_rank % devices), "cudaSetDevice");
        ncclUniqueId id{};
        if (host.is_root()) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        host.broadcast(reinterpret_cast<std::uint8_t*>(&id), sizeof id, 0);
        nccl_check(ncclCommInitRank(&comm_, host.size(), id, host.rank()), "ncclCommInitRank");
    }
    ~nccl_communicator() override {
        if (comm_) ncclCommDestroy(comm_);
    }

    [[nodiscard]] int rank() const override { return host_.rank(); }
    [[nodiscard]] int size() const override { return host_.size(); }
    [[nodiscard]] std::string name() const override { return "nccl"; }
    [[nodiscard]] memory_space memory() const override { return memory_space::device; }
    [[nodiscard]] communicator& host_side() override { return host_; }

    void barrier() override { host_.barrier(); }
    [[noreturn]] void abort(int code, const std::string& why) noexcept override {
        if (comm_) ncclCommAbort(comm_);
        comm_ = nullptr;
        host_.abort(code, why);
    }

protected:
    void do_all_reduce(void* data, std::size_t n, element_type type, reduce_op op) override {
        nccl_check(ncclAllReduce(data, data, n, nccl_type(type), op == reduce_op::average ? ncclAvg : ncclSum, comm_, stream()),
                   "ncclAllReduce");
        wait("all_reduce", n * element_size(type));
    }
    void do_broadcast(void* data, std::size_t bytes, int root) override {
        nccl_check(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream()), "ncclBroadcast");
        wait("broadcast", bytes);
    }
    void do_all_gather(const void* send, std::size_t bytes, void* recv) override {
        nccl_check(ncclAllGather(send, recv, bytes, ncclUint8, comm_, stream()), "ncclAllGather");
        wait("all_gather", bytes * static_cast<std::size_t>(size()));
    }

private:
    static cudaStream_t stream() { return static_cast<cudaStream_t>(cuda::stream_handle()); }
    static ncclDataType_t nccl_type(element_type t) {
        switch (t) {
            case element_type::f32: return ncclFloat32;
            case element_type::f64: return ncclFloat64;
            case element_type::i32: return ncclInt32;
            case element_type::i64: return ncclInt64;
            case element_type::u8: return ncclUint8;
        }
        return ncclUint8;
    }
    void nccl_check(ncclResult_t r, const char* call) const {
        if (r != ncclSuccess)
            throw dist_error(depthlab::detail::cat("dist::nccl: ", call, " failed on rank ", host_.rank(), ": ", ncclGetErrorString(r)));
    }
    static void cuda_check(cudaError_t e, const char* call) {
        if (e != cudaSuccess) throw device_error(depthlab::detail::cat("dist::nccl: ", call, ": ", cudaGetErrorString(e)));
    }
    /// Waits for the collective on the stream, watching NCCL's asynchronous errors and the
    /// deadline (the host MPI communicator's timeout).
    void wait(const char* op, std::size_t bytes) {
        using clock = std::chrono::steady_clock;
        const auto start = clock::now();
        for (;;) {
            const cudaError_t q = cudaStreamQuery(stream());
            if (q == cudaSuccess) break;
            if (q != cudaErrorNotReady) cuda_check(q, "cudaStreamQuery");
            ncclResult_t async = ncclSuccess;
            nccl_check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
            const double waited = std::chrono::duration<double>(clock::now() - start).count();
            if (async != ncclSuccess || waited > host_.timeout_seconds())
                abort(3, depthlab::detail::cat("depthlab: rank ", rank(), " of ", size(), ": NCCL ", op, " of ", bytes, " bytes ",
                                               async != ncclSuccess ? std::string("failed: ") + ncclGetErrorString(async)
                                                                    : depthlab::detail::cat("did not complete in ", host_.timeout_seconds(), " s"),
                                               "; aborting the job"));
            if (waited > 0.01) std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
        const double s = std::chrono::duration<double>(clock::now() - start).count();
        ++stats_.calls;
        stats_.bytes += static_cast<std::int64_t>(bytes);
        stats_.seconds += s;
    }

    mpi_communicator& host_;
    ncclComm_t comm_ = nullptr;
};

}  // namespace depthlab::dist
