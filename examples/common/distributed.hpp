#pragma once
// What an example does to run unchanged alone or under `mpirun -np N` (dist/launch.hpp):
// rank 0 alone prints to stdout and writes the outputs (the other ranks' stdout goes to
// /dev/null; errors still reach stderr, naming the rank), and an error on any rank ends the
// whole job (dist::fail) instead of leaving the others waiting in a collective.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <depthlab/dist/launch.hpp>

namespace examples {

inline constexpr const char* distributed_help =
    "use MPI even when the launcher's environment is not recognised (runs started by mpirun are detected; needs -DDEPTHLAB_WITH_MPI=ON)";

/// The communicator of this run (MPI under a launcher), with stdout quiet on ranks > 0.
/// A build without MPI started by a launcher (or given --distributed) stops here, exit code 2.
inline depthlab::dist::communicator& join(const char* program, bool force_mpi) {
    try {
        depthlab::dist::communicator& comm = depthlab::dist::world(nullptr, nullptr, force_mpi);
        if (!comm.is_root() && !std::freopen("/dev/null", "w", stdout)) {
            std::fprintf(stderr, "%s: rank %d cannot silence its stdout (/dev/null)\n", program, comm.rank());
            std::exit(2);
        }
        return comm;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        std::exit(2);
    }
}

/// "<N> rank(s) (mpi)" for a start-up line.
inline std::string ranks_description(const depthlab::dist::communicator& comm) {
    return std::to_string(comm.size()) + (comm.size() == 1 ? " rank" : " ranks") + " (" + comm.name() + ")";
}

}  // namespace examples
