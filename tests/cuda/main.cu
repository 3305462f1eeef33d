// depthlab_tests_cuda: doctest's main, after a check that a CUDA device exists (CI builds
// this program on machines without a GPU: there it skips with one line and exits 0).
#define DOCTEST_CONFIG_IMPLEMENT
#include <cstdio>

#include <doctest/doctest.h>

#include <depthlab/backend/cuda/cuda.hpp>

int main(int argc, char** argv) {
    if (depthlab::cuda::device_count() == 0) {
        std::puts("depthlab_tests_cuda: no CUDA device found; the CUDA tests are skipped (they are compiled, not run)");
        return 0;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
