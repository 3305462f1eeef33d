// depthlab::compiled: the common float instantiations on the CPU, compiled once (see
// include/depthlab/compiled.hpp). One file per scalar type, so that the two build in parallel.
#include <depthlab/depthlab.hpp>

DEPTHLAB_COMMON_INSTANTIATIONS(template, float)
