#pragma once
// dist::communicator: the collectives data-parallel training needs — rank, size, all-reduce
// (sum or average) of a flat buffer, broadcast, all-gather, barrier — behind one interface
// with three implementations:
//   single_process      the default: rank 0 of 1, every collective a no-op (or a copy); no MPI
//                       needed to build or run;
//   mpi_communicator    dist/mpi.hpp, -DDEPTHLAB_WITH_MPI=ON: host buffers, OpenMPI or any MPI;
//   nccl_communicator   dist/nccl.hpp, -DDEPTHLAB_WITH_NCCL=ON: CUDA device buffers on the
//                       backend's stream, bootstrapped through MPI.
// memory() says where a communicator's buffers live; dist::gradient_buckets stages device
// tensors through the host for a host communicator.
//
// Reduction order: a collective's result must not depend on anything but the ranks' inputs,
// so that every rank takes the same optimiser step. With 2 ranks every element is one
// addition, a + b = b + a exactly; with more, the order is the MPI library's (fixed for a
// given rank count and message size in OpenMPI, but not left to right).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "depthlab/core/error.hpp"
#include "depthlab/core/rng.hpp"

namespace depthlab {
/// A collective that did not complete (a rank died or hangs, a transport failed).
class dist_error : public error {
public:
    using error::error;
};
}  // namespace depthlab

namespace depthlab::dist {

using depthlab::dist_error;

enum class reduce_op { sum, average };
/// Where a communicator's buffers must live.
enum class memory_space { host, device };
enum class element_type { f32, f64, i32, i64, u8 };

template <class T>
constexpr element_type element_of() {
    if constexpr (std::is_same_v<T, float>) return element_type::f32;
    else if constexpr (std::is_same_v<T, double>) return element_type::f64;
    else if constexpr (std::is_same_v<T, std::int32_t>) return element_type::i32;
    else if constexpr (std::is_same_v<T, std::int64_t>) return element_type::i64;
    else {
        static_assert(std::is_same_v<T, std::uint8_t>, "dist: collectives take float, double, int32, int64 or uint8 buffers");
        return element_type::u8;
    }
}
inline std::size_t element_size(element_type t) {
    switch (t) {
        case element_type::f32: case element_type::i32: return 4;
        case element_type::f64: case element_type::i64: return 8;
        case element_type::u8: return 1;
    }
    return 1;
}
inline const char* element_name(element_type t) {
    switch (t) {
        case element_type::f32: return "f32";
        case element_type::f64: return "f64";
        case element_type::i32: return "i32";
        case element_type::i64: return "i64";
        case element_type::u8: return "u8";
    }
    return "?";
}

/// Bytes moved and seconds spent in collectives since the last reset (for the
/// "all-reduce bytes and time per step" of a training report).
struct traffic {
    std::int64_t calls = 0, bytes = 0;
    double seconds = 0;
};

class communicator {
public:
    communicator() = default;
    communicator(const communicator&) = delete;
    communicator& operator=(const communicator&) = delete;
    virtual ~communicator() = default;

    [[nodiscard]] virtual int rank() const = 0;
    [[nodiscard]] virtual int size() const = 0;
    /// "single", "mpi", "nccl".
    [[nodiscard]] virtual std::string name() const = 0;
    [[nodiscard]] virtual memory_space memory() const = 0;
    [[nodiscard]] bool is_root() const { return rank() == 0; }
    /// The communicator of the same ranks for host buffers (itself, unless its own buffers
    /// are device memory): what a trainer reduces its progress values and flags through.
    [[nodiscard]] virtual communicator& host_side() { return *this; }
    [[nodiscard]] bool distributed() const { return size() > 1; }

    /// data[0, n) = the element-wise sum (or mean) of every rank's data[0, n).
    template <class T>
    void all_reduce(T* data, std::size_t n, reduce_op op = reduce_op::sum) {
        static_assert(std::is_floating_point_v<T> || std::is_integral_v<T>);
        if (n) do_all_reduce(data, n, element_of<T>(), op);
    }
    /// data[0, n) = root's data[0, n) on every rank.
    template <class T>
    void broadcast(T* data, std::size_t n, int root = 0) {
        check_root(root, "broadcast");
        if (n) do_broadcast(data, n * sizeof(T), root);
    }
    /// recv[r*n, (r+1)*n) = rank r's send[0, n); recv holds size() * n elements.
    template <class T>
    void all_gather(const T* send, std::size_t n, T* recv) {
        if (n) do_all_gather(send, n * sizeof(T), recv);
    }
    /// Returns when every rank has called it.
    virtual void barrier() = 0;
    /// Ends every rank of the job with `code` after printing `why` (a rank that cannot go on
    /// must not leave the others waiting in a collective). Never returns.
    [[noreturn]] virtual void abort(int code, const std::string& why) noexcept = 0;

    [[nodiscard]] const traffic& stats() const { return stats_; }
    void reset_stats() { stats_ = {}; }

protected:
    virtual void do_all_reduce(void* data, std::size_t n, element_type type, reduce_op op) = 0;
    virtual void do_broadcast(void* data, std::size_t bytes, int root) = 0;
    virtual void do_all_gather(const void* send, std::size_t bytes, void* recv) = 0;
    void check_root(int root, const char* op) const {
        DEPTHLAB_CHECK(root >= 0 && root < size(), usage_error, "dist::", name(), " ", op, ": root ", root, " outside [0, ", size(), ")");
    }
    traffic stats_;
};

/// Rank 0 of 1: the default, with no MPI anywhere.
class single_process final : public communicator {
public:
    [[nodiscard]] int rank() const override { return 0; }
    [[nodiscard]] int size() const override { return 1; }
    [[nodiscard]] std::string name() const override { return "single"; }
    [[nodiscard]] memory_space memory() const override { return memory_space::host; }
    void barrier() override {}
    [[noreturn]] void abort(int code, const std::string& why) noexcept override {
        std::fprintf(stderr, "%s\n", why.c_str());
        std::fflush(nullptr);
        std::exit(code);
    }

protected:
    // A sum over one rank is the data; so is the mean. (Any memory space: nothing is read.)
    void do_all_reduce(void*, std::size_t, element_type, reduce_op) override {}
    void do_broadcast(void*, std::size_t, int) override {}
    void do_all_gather(const void* send, std::size_t bytes, void* recv) override {
        if (send != recv) std::memmove(recv, send, bytes);
    }
};

/// Gives each rank its own random stream from a generator seeded alike on every rank (e.g.
/// dropout: ranks that drew the same masks would train on correlated noise). Rank 0 keeps
/// the stream it has, so a 1-rank run is the single-process run.
inline void own_stream_per_rank(Generator& g, const communicator& comm) {
    if (comm.rank() == 0) return;
    const std::uint64_t r = static_cast<std::uint64_t>(comm.rank());
    g.set_state(g.seed() ^ (0x9e3779b97f4a7c15ull * r), g.offset());
}

/// The process-wide single-process communicator (what a trainer uses when given none).
inline communicator& local() {
    static single_process c;
    return c;
}

/// The number of processes the launcher started, from its environment (OpenMPI's mpirun,
/// MPICH/Hydra, PMIx, Slurm's srun): 1 outside a launcher. Lets a program built without MPI
/// refuse to run as N copies that would each train alone.
inline int launcher_world_size() {
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"}) {
        if (const char* v = std::getenv(var)) {
            const int n = std::atoi(v);
            if (n >= 1) return n;
        }
    }
    return 1;
}

}  // namespace depthlab::dist
