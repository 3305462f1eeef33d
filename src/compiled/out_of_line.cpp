// depthlab::compiled: the one definition of the non-template functions that compiled mode keeps
// out of programs (include/depthlab/core/out_of_line.hpp), and the model configurations'
// metadata I/O (not over a scalar type, so not in the per-type files).
#define DEPTHLAB_COMPILED_OUT_OF_LINE 1
#include <depthlab/depthlab.hpp>

DEPTHLAB_ALL_CONFIG_INSTANTIATIONS(template)
