// Downstream smoke program: everything (include path, C++20, OpenMP, oneDNN) must come
// from the depthlab::depthlab target. The packaging tests parse this output.
#include <depthlab/depthlab.hpp>

#include <cstdio>

#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef DEPTHLAB_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

static_assert(__cplusplus >= 202002L, "depthlab::depthlab must request C++20");

int main() {
    std::printf("depthlab version: %s\n", depthlab::version_string());
#ifdef DEPTHLAB_HAVE_ONEDNN
    const dnnl_version_t* v = dnnl_version();
    std::printf("onednn: yes (%d.%d.%d)\n", v->major, v->minor, v->patch);
#else
    std::printf("onednn: no\n");
#endif
#ifdef DEPTHLAB_COMPILED
    std::printf("compiled mode: yes\n");
#else
    std::printf("compiled mode: no\n");
#endif
#ifdef _OPENMP
    std::printf("openmp: yes (max threads %d)\n", omp_get_max_threads());
#else
    std::printf("openmp: no\n");
#endif
    return 0;
}
