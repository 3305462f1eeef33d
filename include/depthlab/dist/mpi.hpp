#pragma once
// dist::mpi_communicator: the collectives of dist::communicator over MPI (host buffers).
// Build with -DDEPTHLAB_WITH_MPI=ON (CMake finds MPI and defines DEPTHLAB_HAVE_MPI); run under
// the launcher:   mpirun -np 2 build/examples/albert_act ...
//
// Failure behaviour. A rank that dies is the launcher's to notice: OpenMPI's mpirun ends the
// whole job when one process exits abnormally. A rank that hangs (or stopped calling
// collectives, e.g. an exception on one rank only) would leave the others waiting forever, so
// every collective here is non-blocking with a deadline: after `timeout_seconds` (default
// 1800, DEPTHLAB_DIST_TIMEOUT overrides) without completion the rank prints which collective,
// how many bytes and how long it waited, and aborts the job (MPI_Abort), which ends every
// rank. A checkpoint is written by rank 0 alone and atomically (temporary file + rename), so
// the last good one survives any of this.
//
// MPI errors are returned (MPI_ERRORS_RETURN on the communicator) and thrown as dist_error
// naming the call and MPI's message.
#if !defined(DEPTHLAB_HAVE_MPI)
#error "depthlab/dist/mpi.hpp needs MPI: configure with -DDEPTHLAB_WITH_MPI=ON (target depthlab::mpi)"
#endif
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "depthlab/dist/communicator.hpp"

namespace depthlab::dist {

class mpi_communicator final : public communicator {
public:
    /// Initialises MPI unless the program already did (then finalising stays the program's).
    /// timeout_seconds <= 0: DEPTHLAB_DIST_TIMEOUT, else 1800 (a collective waits for the
    /// slowest rank: long enough for uneven evaluations and a checkpoint write).
    explicit mpi_communicator(int* argc = nullptr, char*** argv = nullptr, double timeout_seconds = 0) {
        int initialised = 0;
        MPI_Initialized(&initialised);
        if (!initialised) {
            int provided = 0;
            check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
            owns_mpi_ = true;
            DEPTHLAB_CHECK(provided >= MPI_THREAD_FUNNELED, dist_error, "dist::mpi: this MPI offers thread level ", provided,
                           ", below MPI_THREAD_FUNNELED (OpenMP threads next to MPI calls from the main thread)");
        }
        check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
        check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
        timeout_ = timeout_seconds > 0 ? timeout_seconds : default_timeout();
    }
    ~mpi_communicator() override {
        int finalised = 0;
        MPI_Finalized(&finalised);
        if (finalised) return;
        if (std::uncaught_exceptions() > 0) abort(1, "depthlab: rank " + std::to_string(rank_) + " is unwinding an exception");
        MPI_Comm_free(&comm_);
        if (owns_mpi_) MPI_Finalize();
    }

    [[nodiscard]] int rank() const override { return rank_; }
    [[nodiscard]] int size() const override { return size_; }
    [[nodiscard]] std::string name() const override { return "mpi"; }
    [[nodiscard]] memory_space memory() const override { return memory_space::host; }
    [[nodiscard]] double timeout_seconds() const { return timeout_; }
    void set_timeout(double seconds) {
        DEPTHLAB_CHECK(seconds > 0, usage_error, "dist::mpi: timeout ", seconds, " s is not > 0");
        timeout_ = seconds;
    }
    [[nodiscard]] MPI_Comm handle() const { return comm_; }

    void barrier() override {
        MPI_Request req;
        check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
        wait(req, "barrier", 0);
    }
    [[noreturn]] void abort(int code, const std::string& why) noexcept override {
        std::fprintf(stderr, "%s\n", why.c_str());
        std::fflush(nullptr);
        MPI_Abort(MPI_COMM_WORLD, code);
        std::_Exit(code);  // (MPI_Abort does not return; this is for the compiler)
    }

    /// DEPTHLAB_DIST_TIMEOUT (seconds), else 1800.
    static double default_timeout() {
        if (const char* v = std::getenv("DEPTHLAB_DIST_TIMEOUT")) {
            char* end = nullptr;
            const double s = std::strtod(v, &end);
            DEPTHLAB_CHECK(end != v && *end == '\0' && s > 0, usage_error, "DEPTHLAB_DIST_TIMEOUT='", v,
                           "' is not a number of seconds > 0");
            return s;
        }
        return 1800.0;
    }

protected:
    void do_all_reduce(void* data, std::size_t n, element_type type, reduce_op op) override {
        DEPTHLAB_CHECK(op == reduce_op::sum || type == element_type::f32 || type == element_type::f64, usage_error,
                       "dist::mpi all_reduce: an average of ", element_name(type), " values (sum them instead)");
        const std::size_t esize = element_size(type);
        for (std::size_t done = 0; done < n;) {  // MPI counts are int
            const std::size_t part = std::min<std::size_t>(n - done, max_count);
            MPI_Request req;
            check(MPI_Iallreduce(MPI_IN_PLACE, static_cast<char*>(data) + done * esize, static_cast<int>(part), mpi_type(type), MPI_SUM,
                                 comm_, &req),
                  "MPI_Iallreduce");
            wait(req, "all_reduce", part * esize);
            done += part;
        }
        if (op == reduce_op::average) divide(data, n, type);
    }
    void do_broadcast(void* data, std::size_t bytes, int root) override {
        for (std::size_t done = 0; done < bytes;) {
            const std::size_t part = std::min<std::size_t>(bytes - done, max_count);
            MPI_Request req;
            check(MPI_Ibcast(static_cast<char*>(data) + done, static_cast<int>(part), MPI_BYTE, root, comm_, &req), "MPI_Ibcast");
            wait(req, "broadcast", part);
            done += part;
        }
    }
    void do_all_gather(const void* send, std::size_t bytes, void* recv) override {
        DEPTHLAB_CHECK(bytes <= max_count, usage_error, "dist::mpi all_gather: ", bytes, " bytes per rank exceed ", max_count);
        MPI_Request req;
        check(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, comm_, &req),
              "MPI_Iallgather");
        wait(req, "all_gather", bytes * static_cast<std::size_t>(size_));
    }

private:
    static constexpr std::size_t max_count = std::size_t{1} << 30;

    static MPI_Datatype mpi_type(element_type t) {
        switch (t) {
            case element_type::f32: return MPI_FLOAT;
            case element_type::f64: return MPI_DOUBLE;
            case element_type::i32: return MPI_INT32_T;
            case element_type::i64: return MPI_INT64_T;
            case element_type::u8: return MPI_UINT8_T;
        }
        return MPI_BYTE;
    }
    void divide(void* data, std::size_t n, element_type type) const {
        const auto run = [&]<class T>(T* p) {
            for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(size_));
        };
        switch (type) {
            case element_type::f32: run(static_cast<float*>(data)); break;
            case element_type::f64: run(static_cast<double*>(data)); break;
            default: break;  // (refused before reducing)
        }
    }
    void check(int rc, const char* call) const {
        if (rc == MPI_SUCCESS) return;
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        throw dist_error(depthlab::detail::cat("dist::mpi: ", call, " failed on rank ", rank_, ": ", std::string(msg, len)));
    }
    /// Completes req, or aborts the job once timeout_ has passed (see the file comment).
    /// Spins on MPI_Test for the first 10 ms (MPI progresses a non-blocking collective only
    /// inside MPI calls), then tests every 100 µs so a rank waiting for a slow one (e.g.
    /// rank 0 writing a checkpoint) does not burn its core.
    void wait(MPI_Request& req, const char* op, std::size_t bytes) {
        using clock = std::chrono::steady_clock;
        const auto start = clock::now();
        for (long polls = 0;; ++polls) {
            int done = 0;
            check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
            if (done) break;
            const double waited = std::chrono::duration<double>(clock::now() - start).count();
            if (waited > timeout_)
                abort(3, depthlab::detail::cat("depthlab: rank ", rank_, " of ", size_, ": MPI ", op, " of ", bytes,
                                               " bytes did not complete in ", timeout_,
                                               " s (DEPTHLAB_DIST_TIMEOUT): another rank has died, hangs or stopped calling "
                                               "collectives; aborting the job"));
            if (waited > 0.01) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        const double s = std::chrono::duration<double>(clock::now() - start).count();
        ++stats_.calls;
        stats_.bytes += static_cast<std::int64_t>(bytes);
        stats_.seconds += s;
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0, size_ = 1;
    double timeout_ = 1800;
    bool owns_mpi_ = false;
};

}  // namespace depthlab::dist
