#pragma once
// dist::world(): the communicator of this process, chosen from how it was started, so that a
// program runs unchanged alone or under a launcher:
//     build/examples/albert_act ...                 -> single_process (rank 0 of 1)
//     mpirun -np 2 build/examples/albert_act ...    -> mpi_communicator (2 ranks)
// MPI is used when the program was built with it (DEPTHLAB_HAVE_MPI: link depthlab::mpi) and
// a launcher started several processes (dist::launcher_world_size()), or when `force` asks
// for it (a `--distributed` flag). Started by a launcher but built without MPI is an error:
// N copies would each train alone and overwrite each other's outputs.
//
//     int main(int argc, char** argv) {
//         dist::communicator& comm = dist::world(&argc, &argv);
//         try { ... } catch (const std::exception& e) { dist::fail(comm, "my_program", e); }
//     }
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "depthlab/core/error.hpp"
#include "depthlab/dist/communicator.hpp"
#if defined(DEPTHLAB_HAVE_MPI)
#include "depthlab/dist/mpi.hpp"
#endif

namespace depthlab::dist {

/// Whether this build can run with several processes.
inline constexpr bool built_with_mpi =
#if defined(DEPTHLAB_HAVE_MPI)
    true;
#else
    false;
#endif

/// The process's communicator (created on the first call; later calls return the same one).
inline communicator& world(int* argc = nullptr, char*** argv = nullptr, bool force = false) {
    static std::unique_ptr<communicator> made;
    if (made) return *made;
    const int launched = launcher_world_size();
#if defined(DEPTHLAB_HAVE_MPI)
    if (launched > 1 || force) {
        made = std::make_unique<mpi_communicator>(argc, argv);
        return *made;
    }
#else
    (void)argc, (void)argv;
    DEPTHLAB_CHECK(launched == 1 && !force, usage_error, "this program was built without MPI but ",
                   force ? std::string("--distributed was given") : depthlab::detail::cat("a launcher started ", launched, " processes"),
                   ": configure with -DDEPTHLAB_WITH_MPI=ON (and link depthlab::mpi)");
#endif
    made = std::make_unique<single_process>();
    return *made;
}

/// Ends the job after an error on this rank: prints "<program>: [rank r of n: ]<what>" to
/// stderr, then every rank stops (MPI_Abort) instead of waiting in a collective for this one;
/// alone, exits with `code`.
[[noreturn]] inline void fail(communicator& comm, const std::string& program, const std::exception& e, int code = 1) {
    const std::string where = comm.distributed() ? depthlab::detail::cat("rank ", comm.rank(), " of ", comm.size(), ": ") : std::string();
    comm.abort(code, program + ": " + where + e.what());
    std::_Exit(code);  // (not reached: abort() does not return, but a virtual call is not known to)
}

}  // namespace depthlab::dist
