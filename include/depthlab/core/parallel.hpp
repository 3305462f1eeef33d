#pragma once
// Fork-join over index ranges with OpenMP (the same runtime oneDNN uses, so both share one
// thread pool). Bodies must not throw: every check happens before the parallel region.
#include <algorithm>

#include "depthlab/core/shape.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace depthlab {

inline int max_threads() {
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/// Sets the number of threads of later parallel regions (torch.set_num_threads); a no-op
/// in a build without OpenMP code generation (e.g. clang with -fopenmp=libgomp).
inline void set_num_threads(int n) {
#if defined(_OPENMP)
    omp_set_num_threads(std::max(n, 1));
#else
    (void)n;
#endif
}
/// Sets the thread count for a scope and restores the previous one at its end.
class scoped_num_threads {
public:
    explicit scoped_num_threads(int n) : saved_(max_threads()) { set_num_threads(n); }
    ~scoped_num_threads() { set_num_threads(saved_); }
    scoped_num_threads(const scoped_num_threads&) = delete;
    scoped_num_threads& operator=(const scoped_num_threads&) = delete;

private:
    int saved_;
};

/// Calls f(begin, end) on disjoint chunks covering [0, n), each at least `grain` long
/// (except when n < grain); runs serially when one chunk suffices or when already nested.
template <class F>
void parallel_for(index_t n, index_t grain, F&& f) {
    if (n <= 0) return;
#if defined(_OPENMP)
    const index_t chunks = std::min<index_t>(max_threads(), (n + grain - 1) / std::max<index_t>(grain, 1));
    if (chunks > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(static_cast<int>(chunks))
        {
            const index_t t = omp_get_thread_num(), nt = omp_get_num_threads();
            const index_t begin = n * t / nt, end = n * (t + 1) / nt;
            if (begin < end) f(begin, end);
        }
        return;
    }
#else
    (void)grain;
#endif
    f(index_t{0}, n);
}

}  // namespace depthlab
