#pragma once
// primitives<backend::cpu>: the numerical routines behind every op, on host memory.
// Parallel over rows or chunks with OpenMP; the inner loops are the per-ISA kernels.
//
// Written once as host_primitives<B> for the two backends whose memory is on the host:
// backend::cpu, and backend::host_device, which counts every call as a kernel launch
// (see backend/host_device/host_device.hpp). Every pointer argument is device memory of B;
// nothing here returns a value to the host: reductions write into device buffers.
//
// Index arguments (ids, targets) that are out of range never read or write out of
// bounds: gathered rows become NaN, losses of such rows NaN, scattered rows are skipped.
// The ops check ids on the host where the ids are on the host, so these guards are a
// last line, not the error report.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cpu/gemm.hpp"
#include "depthlab/backend/elementwise.hpp"
#include "depthlab/backend/cpu/kernels.hpp"
#include "depthlab/backend/cpu/memory.hpp"
#include "depthlab/core/parallel.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/shape.hpp"
#include "depthlab/backend/update_rules.hpp"

namespace depthlab {

namespace cpu {
template <class B>
struct host_primitives {
    static constexpr index_t elem_grain = 1 << 15;  // elements per task for elementwise ops

    /// While a multi-tensor routine runs, its per-tensor calls count as one launch (the one
    /// kernel a device runs for all the tensors).
    struct one_launch {
        static int& depth() {
            thread_local int d = 0;
            return d;
        }
        static bool& counted() {
            thread_local bool c = false;
            return c;
        }
        one_launch() {
            if (depth()++ == 0) counted() = false;
        }
        ~one_launch() { --depth(); }
        one_launch(const one_launch&) = delete;
        one_launch& operator=(const one_launch&) = delete;
    };
    /// One primitive call = one kernel launch, counted on backends that are not the host.
    static void launch() {
        if (one_launch::depth() > 0) {
            if (one_launch::counted()) return;
            one_launch::counted() = true;
        }
        if constexpr (!B::host_accessible) counters<B>().launches.fetch_add(1, std::memory_order_relaxed);
    }
    /// A GEMM call: a launch, counted as a GEMM and by its FLOPs.
    static void launch_gemm(const gemm_args& g) {
        launch();
        count_gemm_flops(g);
        if constexpr (!B::host_accessible) counters<B>().gemms.fetch_add(1, std::memory_order_relaxed);
    }

    static index_t row_grain(index_t cols) { return std::max<index_t>(1, elem_grain / std::max<index_t>(cols, 1)); }

    // ---- elementwise ----
    template <class T>
    static void fill(index_t n, T v, T* y) {
        launch();
        parallel_for(n, elem_grain, [&](index_t b, index_t e) { std::fill(y + b, y + e, v); });
    }
    /// dst (=|+=) src over an N-d shape with arbitrary strides on both sides.
    template <class T>
    static void copy_strided(const Shape& shape, const T* src, const Shape& sst, T* dst, const Shape& dst_st, bool accumulate) {
        launch();
        const int r = shape.rank();
        if (r == 0) {
            *dst = accumulate ? *dst + *src : *src;
            return;
        }
        const index_t inner = shape[r - 1], outer = shape.numel() / std::max<index_t>(inner, 1);
        if (inner == 0) return;
        const index_t si = sst[r - 1], di = dst_st[r - 1];
        parallel_for(outer, row_grain(inner), [&](index_t b, index_t e) {
            for (index_t o = b; o < e; ++o) {
                index_t so = 0, doff = 0, rem = o;
                for (int k = r - 2; k >= 0; --k) {
                    const index_t d = rem % shape[k];
                    rem /= shape[k];
                    so += d * sst[k];
                    doff += d * dst_st[k];
                }
                const T* s = src + so;
                T* d = dst + doff;
                if (accumulate) for (index_t i = 0; i < inner; ++i) d[i * di] += s[i * si];
                else for (index_t i = 0; i < inner; ++i) d[i * di] = s[i * si];
            }
        });
    }

    /// Runs `K::kernel(len, offset)` for K = kernels<T, active ISA> over chunks of [0, n).
    template <class T, class F>
    static void chunked(index_t n, F&& f) {
        launch();
        cpu::with_isa<T>([&]<class K>() {
            parallel_for(n, elem_grain, [&](index_t b, index_t e) { f.template operator()<K>(b, e - b); });
        });
    }
    /// Runs `f<K>(row)` for every row in parallel.
    template <class T, class F>
    static void rowwise(index_t rows, index_t cols, F&& f) {
        launch();
        cpu::with_isa<T>([&]<class K>() {
            parallel_for(rows, row_grain(cols), [&](index_t b, index_t e) {
                for (index_t r = b; r < e; ++r) f.template operator()<K>(r);
            });
        });
    }
    /// Runs `f<K>(col_begin, col_count)` over column blocks (for reductions over rows:
    /// each thread owns its columns, so no partial sums need merging).
    template <class T, class F>
    static void columnwise(index_t rows, index_t cols, F&& f) {
        launch();
        const index_t block = 64;
        const index_t nblocks = (cols + block - 1) / block;
        cpu::with_isa<T>([&]<class K>() {
            parallel_for(nblocks, std::max<index_t>(1, elem_grain / std::max<index_t>(rows * block, 1)), [&](index_t b, index_t e) {
                const index_t c0 = b * block, c1 = std::min(cols, e * block);
                f.template operator()<K>(c0, c1 - c0);
            });
        });
    }

    // y = a + b
    template <class T>
    static void add(index_t n, const T* a, const T* b, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::add(m, a + o, b + o, y + o); });
    }
    // y = a * b
    template <class T>
    static void mul(index_t n, const T* a, const T* b, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::mul(m, a + o, b + o, y + o); });
    }
    // y += a * b
    template <class T>
    static void mul_acc(index_t n, const T* a, const T* b, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::mul_acc(m, a + o, b + o, y + o); });
    }
    // y = alpha * x + beta * y
    template <class T>
    static void axpby(index_t n, T alpha, const T* x, T beta, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::axpby(m, alpha, x + o, beta, y + o); });
    }

    // ---- row broadcast: x (rows, cols), v (cols) ----
    // y[r] = x[r] + v   (bias)
    template <class T>
    static void add_row_vector(index_t rows, index_t cols, const T* x, const T* v, T* y) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) { K::add(cols, x + r * cols, v, y + r * cols); });
    }
    // y[r] = x[r] * v
    template <class T>
    static void mul_row_vector(index_t rows, index_t cols, const T* x, const T* v, T* y) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) { K::mul(cols, x + r * cols, v, y + r * cols); });
    }
    // dx[r] += dy[r] * v
    template <class T>
    static void mul_row_vector_acc(index_t rows, index_t cols, const T* dy, const T* v, T* dx) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) { K::mul_acc(cols, dy + r * cols, v, dx + r * cols); });
    }
    // v += sum over rows of x            (bias gradient)
    template <class T>
    static void sum_rows_acc(index_t rows, index_t cols, const T* x, T* v, bool accumulate = true) {
        columnwise<T>(rows, cols, [&]<class K>(index_t c0, index_t nc) {
            if (!accumulate) std::fill(v + c0, v + c0 + nc, T(0));
            for (index_t r = 0; r < rows; ++r) K::add(nc, v + c0, x + r * cols + c0, v + c0);
        });
    }
    // v += sum over rows of a * b        (gradient of a broadcast factor)
    template <class T>
    static void sum_rows_mul_acc(index_t rows, index_t cols, const T* a, const T* b, T* v) {
        columnwise<T>(rows, cols, [&]<class K>(index_t c0, index_t nc) {
            for (index_t r = 0; r < rows; ++r) K::mul_acc(nc, a + r * cols + c0, b + r * cols + c0, v + c0);
        });
    }

    // y[r] = w[r] * x[r]   (per-row weights: ACT's state interpolation)
    template <class T>
    static void scale_rows(index_t rows, index_t cols, const T* x, const T* w, T* y) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) { K::axpby(cols, w[r], x + r * cols, T(0), y + r * cols); });
    }
    // dx[r] += w[r] * dy[r] (dx may be null);  dw[r] += <dy[r], x[r]> (dw may be null)
    template <class T>
    static void scale_rows_bwd(index_t rows, index_t cols, const T* x, const T* w, const T* dy, T* dx, T* dw) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) {
            if (dx) K::axpby(cols, w[r], dy + r * cols, T(1), dx + r * cols);
            if (dw) dw[r] += K::dot(cols, dy + r * cols, x + r * cols);
        });
    }

    // y[r] = a[r] + w[r] (b[r] - a[r])   (ACT's state update s + w (y - s), one pass)
    template <class T>
    static void interpolate_rows(index_t rows, index_t cols, const T* a, const T* b, const T* w, T* y) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) { K::lerp(cols, a + r * cols, b + r * cols, w[r], y + r * cols); });
    }
    // da[r] = (1 - w[r]) dy[r] + beta_a da[r],  db[r] = w[r] dy[r] + beta_b db[r]  (beta 0 never
    // reads; a null pointer is skipped; da before db, so da == db sums both),
    // dw[r] (=|+= by beta_w) <dy[r], b[r] - a[r]> (dw may be null)
    template <class T>
    static void interpolate_rows_bwd(index_t rows, index_t cols, const T* a, const T* b, const T* w, const T* dy, T* da, T beta_a,
                                     T* db, T beta_b, T* dw, T beta_w = T(1)) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) {
            const index_t o = r * cols;
            if (da) K::axpby(cols, T(1) - w[r], dy + o, beta_a, da + o);
            if (db) K::axpby(cols, w[r], dy + o, beta_b, db + o);
            if (dw) {
                const T g = K::dot_diff(cols, dy + o, b + o, a + o);
                dw[r] = beta_w == T(0) ? g : dw[r] + g;  // (beta 0 never reads dw)
            }
        });
    }

    // ---- activations: forward from x, backward accumulates into dx ----
    template <class T> static void gelu_fwd(index_t n, const T* x, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::gelu_fwd(m, x + o, y + o); });
    }
    template <class T> static void gelu_bwd(index_t n, const T* x, const T* dy, T* dx, bool accumulate = true) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) {
            if (!accumulate) std::fill(dx + o, dx + o + m, T(0));  // (the chunk, while it is in cache)
            K::gelu_bwd(m, x + o, dy + o, dx + o);
        });
    }
    // GELU, exact (erf) form: libm's erf per element (no vector erf), parallel over fixed
    // chunks like every elementwise primitive.
    template <class T> static void gelu_erf_fwd(index_t n, const T* x, T* y) {
        launch();
        parallel_for(n, elem_grain, [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) y[i] = elementwise::gelu_erf(x[i]);
        });
    }
    // dx += dy * gelu_erf'(x)   (from the input x)
    template <class T> static void gelu_erf_bwd(index_t n, const T* x, const T* dy, T* dx, bool accumulate = true) {
        launch();
        parallel_for(n, elem_grain, [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) dx[i] = (accumulate ? dx[i] : T(0)) + dy[i] * elementwise::gelu_erf_grad(x[i]);
        });
    }
    template <class T> static void relu_fwd(index_t n, const T* x, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::relu_fwd(m, x + o, y + o); });
    }
    template <class T> static void relu_bwd(index_t n, const T* x, const T* dy, T* dx, bool accumulate = true) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) {
            if (!accumulate) std::fill(dx + o, dx + o + m, T(0));  // (the chunk, while it is in cache)
            K::relu_bwd(m, x + o, dy + o, dx + o);
        });
    }
    template <class T> static void tanh_fwd(index_t n, const T* x, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::tanh_fwd(m, x + o, y + o); });
    }
    // (from the output y)
    template <class T> static void tanh_bwd(index_t n, const T* y, const T* dy, T* dx, bool accumulate = true) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) {
            if (!accumulate) std::fill(dx + o, dx + o + m, T(0));  // (the chunk, while it is in cache)
            K::tanh_bwd(m, y + o, dy + o, dx + o);
        });
    }
    template <class T> static void sigmoid_fwd(index_t n, const T* x, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::sigmoid_fwd(m, x + o, y + o); });
    }
    // (from the output y)
    template <class T> static void sigmoid_bwd(index_t n, const T* y, const T* dy, T* dx, bool accumulate = true) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) {
            if (!accumulate) std::fill(dx + o, dx + o + m, T(0));  // (the chunk, while it is in cache)
            K::sigmoid_bwd(m, y + o, dy + o, dx + o);
        });
    }
    // log σ(x) = min(x, 0) − log1p(exp(−|x|)): finite for every x, where σ itself rounds to 0
    // or 1. Used on per-token halting logits (thousands of values per step), so a scalar
    // loop is enough.
    template <class T> static void log_sigmoid_fwd(index_t n, const T* x, T* y) {
        launch();
        for (index_t i = 0; i < n; ++i) y[i] = elementwise::log_sigmoid(x[i]);
    }
    // dx += dy · σ(−x)   (from the input x)
    template <class T> static void log_sigmoid_bwd(index_t n, const T* x, const T* dy, T* dx, bool accumulate = true) {
        launch();
        for (index_t i = 0; i < n; ++i) dx[i] = (accumulate ? dx[i] : T(0)) + dy[i] * elementwise::log_sigmoid_grad(x[i]);
    }

    // ---- reductions (into device memory) ----
    /// The sum of x[0..n) in double: fixed chunks of elem_grain whose partial sums are added
    /// in chunk order, so the result has the same bits for any OMP_NUM_THREADS.
    template <class T>
    static double sum_double(index_t n, const T* x) {
        const index_t nchunks = std::max<index_t>(1, (n + elem_grain - 1) / elem_grain);
        std::vector<double> part(static_cast<std::size_t>(nchunks), 0.0);
        cpu::with_isa<T>([&]<class K>() {
            parallel_for(nchunks, 1, [&](index_t b, index_t e) {
                for (index_t c = b; c < e; ++c) {
                    const index_t lo = c * elem_grain, hi = std::min(n, lo + elem_grain);
                    part[static_cast<std::size_t>(c)] = static_cast<double>(K::sum(hi - lo, x + lo));
                }
            });
        });
        double s = 0;
        for (double p : part) s += p;
        return s;
    }
    // out[0] = scale * sum(x)   (the sum rounded to T before the scaling)
    template <class T>
    static void sum_to(index_t n, const T* x, T scale, T* out) {
        launch();
        out[0] = static_cast<T>(sum_double(n, x)) * scale;
    }
    // y[i] += factor * s[0] * x[i]; x == nullptr: y[i] += factor * s[0]  (s: a device scalar,
    // e.g. the upstream gradient of a loss)
    template <class T>
    static void add_scaled_by(index_t n, const T* s, T factor, const T* x, T* y) {
        const T a = factor * s[0];
        if (x) chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::axpby(m, a, x + o, T(1), y + o); });
        else chunked<T>(n, [&]<class K>(index_t o, index_t m) {
            for (index_t i = 0; i < m; ++i) y[o + i] += a;
        });
    }
    // flag[0] = 1 if any of x[0..n) is NaN or infinite, else 0 (a finiteness check that
    // leaves the decision, and the synchronisation, to the caller)
    template <class T>
    static void nonfinite_flag(index_t n, const T* x, std::int32_t* flag) {
        launch();
        const index_t nchunks = std::max<index_t>(1, (n + elem_grain - 1) / elem_grain);
        std::vector<char> bad(static_cast<std::size_t>(nchunks), 0);
        parallel_for(nchunks, 1, [&](index_t b, index_t e) {
            for (index_t c = b; c < e; ++c) {
                const index_t lo = c * elem_grain, hi = std::min(n, lo + elem_grain);
                T acc = T(0);
                for (index_t i = lo; i < hi; ++i) acc += x[i] * T(0);  // NaN iff some x[i] is NaN or inf
                bad[static_cast<std::size_t>(c)] = acc != acc;
            }
        });
        flag[0] = std::find(bad.begin(), bad.end(), 1) != bad.end() ? 1 : 0;
    }

    // ---- softmax family (last axis) ----
    // y[r] = softmax(scale * x[r] + mask[map(r)]); mask may be null.
    template <class T>
    static void softmax_fwd(index_t rows, index_t cols, const T* x, T scale, const T* mask, const row_broadcast& map, T* y) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) {
            K::softmax_row(cols, x + r * cols, scale, mask ? mask + map.offset(r) : nullptr, y + r * cols);
        });
    }
    // dx (+)= scale * y * (dy - <y, dy>); without accumulate, dx may alias dy
    template <class T>
    static void softmax_bwd(index_t rows, index_t cols, const T* y, const T* dy, T scale, T* dx, bool accumulate = true) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) {
            K::softmax_bwd_row(cols, y + r * cols, dy + r * cols, scale, dx + r * cols, accumulate);
        });
    }
    template <class T>
    static void log_softmax_fwd(index_t rows, index_t cols, const T* x, T* y) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) { K::log_softmax_row(cols, x + r * cols, y + r * cols); });
    }
    template <class T>
    static void log_softmax_bwd(index_t rows, index_t cols, const T* y, const T* dy, T* dx) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) { K::log_softmax_bwd_row(cols, y + r * cols, dy + r * cols, dx + r * cols); });
    }

    // ---- layer norm (last axis) ----
    template <class T>
    static void layernorm_fwd(index_t rows, index_t cols, const T* x, const T* gamma, const T* beta, T eps, T* y, T* mean, T* rstd) {
        rowwise<T>(rows, cols, [&]<class K>(index_t r) {
            K::layernorm_row(cols, x + r * cols, gamma, beta, eps, y + r * cols, mean + r, rstd + r);
        });
    }
    // dx += ..., dgamma += ..., dbeta += ...  (any of the three may be null)
    template <class T>
    static void layernorm_bwd(index_t rows, index_t cols, const T* x, const T* dy, const T* gamma, const T* mean, const T* rstd,
                              T* dx, T* dgamma, T* dbeta, bool accumulate_dx = true, bool accumulate_params = true) {
        if (dx)
            rowwise<T>(rows, cols, [&]<class K>(index_t r) {
                if (!accumulate_dx) std::fill(dx + r * cols, dx + (r + 1) * cols, T(0));
                K::layernorm_bwd_row(cols, x + r * cols, dy + r * cols, gamma, mean[r], rstd[r], dx + r * cols);
            });
        if (dgamma && dbeta)
            columnwise<T>(rows, cols, [&]<class K>(index_t c0, index_t nc) {
                if (!accumulate_params) {
                    std::fill(dgamma + c0, dgamma + c0 + nc, T(0));
                    std::fill(dbeta + c0, dbeta + c0 + nc, T(0));
                }
                for (index_t r = 0; r < rows; ++r)
                    K::layernorm_param_grad_row(nc, x + r * cols + c0, dy + r * cols + c0, mean[r], rstd[r], dgamma + c0, dbeta + c0);
            });
    }

    // ---- a post-LN residual: out = layer norm of z = x + dropout(y) ----
    // z = x + y * mask (the mask of dropout_apply from `first`; p 0: none) is kept for the
    // backward. The same bits as dropout_apply, add and layernorm_fwd in turn: the same kernels
    // on the same values, without writing the dropped y and reading it back.
    template <class T>
    static void residual_layernorm_fwd(index_t rows, index_t cols, const T* x, const T* y, T p, const Generator& gen, std::uint64_t first,
                                       const T* gamma, const T* beta, T eps, T* z, T* out, T* mean, T* rstd) {
        const dropout_words<T> words(p, gen, first);
        rowwise<T>(rows, cols, [&]<class K>(index_t r) {
            const index_t o = r * cols;
            for_each_piece<K>(words, o, cols, [&](index_t c, index_t m, const T* mask) {
                if (!mask) return K::add(m, x + o + c, y + o + c, z + o + c);
                alignas(64) T dropped[dropout_piece];
                K::mul(m, y + o + c, mask, dropped);
                K::add(m, x + o + c, dropped, z + o + c);
            });
            K::layernorm_row(cols, z + o, gamma, beta, eps, out + o, mean + r, rstd + r);
        });
    }
    // Its backward to x and y: dz = layer norm's input gradient for dout, dx = dz and
    // dy = dropout(dz) (+= with accumulate_*; a null one is skipped). gamma's and beta's
    // gradients are layernorm_bwd's (with dx null). The bits of layernorm_bwd, add's backward
    // and dropout_apply in turn.
    template <class T>
    static void residual_layernorm_bwd(index_t rows, index_t cols, const T* z, const T* dout, const T* gamma, const T* mean, const T* rstd,
                                       T p, const Generator& gen, std::uint64_t first, T* dx, bool accumulate_dx, T* dy, bool accumulate_dy) {
        if (!dx && !dy) return;
        const dropout_words<T> words(p, gen, first);
        rowwise<T>(rows, cols, [&]<class K>(index_t r) {
            const index_t o = r * cols;
            const auto means = K::layernorm_bwd_means(cols, z + o, dout + o, gamma, mean[r], rstd[r]);
            for_each_piece<K>(words, o, cols, [&](index_t c, index_t m, const T* mask) {
                alignas(64) T dz[dropout_piece];
                std::fill_n(dz, m, T(0));
                K::layernorm_bwd_apply(m, z + o + c, dout + o + c, gamma + c, mean[r], rstd[r], means, dz);
                // dy before dx: when x and y are one variable, dx adds to what dy wrote
                if (dy && !mask) {
                    if (accumulate_dy) K::add(m, dy + o + c, dz, dy + o + c);
                    else std::copy_n(dz, m, dy + o + c);
                } else if (dy) {
                    if (accumulate_dy) K::mul_acc(m, dz, mask, dy + o + c);
                    else K::mul(m, dz, mask, dy + o + c);
                }
                if (dx) {
                    if (accumulate_dx) K::add(m, dx + o + c, dz, dx + o + c);
                    else std::copy_n(dz, m, dx + o + c);
                }
            });
        });
    }

    // ---- cross-entropy over rows of logits (rows, V) ----
    // loss[r] = (1-eps)(lse - x[t]) + eps (lse - mean_j x[j]); rows with t == ignore get 0,
    // rows with t outside [0, V) get NaN.
    template <class T>
    static void cross_entropy_fwd(index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore,
                                  T smoothing, T* loss, T* lse) {
        rowwise<T>(rows, V, [&]<class K>(index_t r) {
            const T* x = logits + r * V;
            const T l = K::log_softmax_row(V, x, nullptr);
            lse[r] = l;
            const std::int64_t t = target[r];
            if (t == ignore) {
                loss[r] = T(0);
                return;
            }
            if (t < 0 || t >= V) {
                loss[r] = std::numeric_limits<T>::quiet_NaN();
                return;
            }
            T value = (T(1) - smoothing) * (l - x[t]);
            if (smoothing != T(0)) value += smoothing * (l - K::sum(V, x) / static_cast<T>(V));
            loss[r] = value;
        });
    }
    // The mean over the counted rows (target != ignore): inv_count[0] = 1 / count (0 when no
    // row counts), mean[0] = sum(loss) * inv_count[0].
    template <class T>
    static void cross_entropy_mean(index_t rows, const T* loss, const std::int64_t* target, std::int64_t ignore, T* mean,
                                   T* inv_count) {
        launch();
        index_t counted = 0;
        for (index_t r = 0; r < rows; ++r) counted += target[r] != ignore;
        const T denom = counted > 0 ? T(1) / static_cast<T>(counted) : T(0);
        inv_count[0] = denom;
        mean[0] = static_cast<T>(sum_double(rows, loss)) * denom;
    }
    // dlogits[r] += g_r * (softmax(x) - (1-eps) onehot(t) - eps/V), with the row's upstream
    // gradient g_r = g[r * g_stride] (times g_scale[0] when given); ignored and out-of-range
    // rows untouched.
    template <class T>
    static void cross_entropy_bwd(index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore,
                                  T smoothing, const T* lse, const T* g, index_t g_stride, const T* g_scale, T* dlogits) {
        rowwise<T>(rows, V, [&]<class K>(index_t r) {
            const std::int64_t t = target[r];
            if (t == ignore || t < 0 || t >= V) return;
            const T* x = logits + r * V;
            T* d = dlogits + r * V;
            const T gr = g_scale ? g[r * g_stride] * g_scale[0] : g[r * g_stride];
            K::cross_entropy_grad_row(V, x, lse[r], gr, smoothing / static_cast<T>(V), d);
            d[t] -= gr * (T(1) - smoothing);
        });
    }

    // ---- rows by index (ids index rows of `table` / `dst`, which have `limit` rows) ----
    // out[i] (=|+=) table[ids[i]]
    template <class T>
    static void gather_rows(index_t n, index_t cols, const T* table, index_t limit, const std::int64_t* ids, T* out,
                            bool accumulate = false) {
        gather_rows_strided(n, cols, cols, cols, table, limit, ids, out, accumulate);
    }
    // The first `cols` values of rows that lie src_stride / dst_stride apart: out row i
    // (=|+=) table row ids[i] (e.g. the filled positions of a decoder cache).
    template <class T>
    static void gather_rows_strided(index_t n, index_t cols, index_t src_stride, index_t dst_stride, const T* table, index_t limit,
                                    const std::int64_t* ids, T* out, bool accumulate = false) {
        launch();
        parallel_for(n, row_grain(cols), [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) {
                T* o = out + i * dst_stride;
                if (ids[i] < 0 || ids[i] >= limit) {
                    std::fill_n(o, cols, std::numeric_limits<T>::quiet_NaN());
                    continue;
                }
                const T* src = table + ids[i] * src_stride;
                if (accumulate) for (index_t c = 0; c < cols; ++c) o[c] += src[c];
                else std::copy_n(src, cols, o);
            }
        });
    }
    // table[ids[i]] += src[i]  (repeated ids accumulate; threads own column blocks)
    template <class T>
    static void scatter_add_rows(index_t n, index_t cols, const T* src, index_t limit, const std::int64_t* ids, T* table,
                                 bool accumulate = true) {
        if (!accumulate)  // every row of the table written: zeros (a streaming pass, faster than by column blocks), then the sums
            parallel_for(limit * cols, elem_grain, [&](index_t b, index_t e) { std::fill(table + b, table + e, T(0)); });
        columnwise<T>(n, cols, [&]<class K>(index_t c0, index_t nc) {
            for (index_t i = 0; i < n; ++i)
                if (ids[i] >= 0 && ids[i] < limit)
                    K::add(nc, table + ids[i] * cols + c0, src + i * cols + c0, table + ids[i] * cols + c0);
        });
    }
    // dst[ids[i]] = src[i]   (ids without repeats)
    template <class T>
    static void scatter_rows_set(index_t n, index_t cols, const T* src, index_t limit, const std::int64_t* ids, T* dst) {
        launch();
        parallel_for(n, row_grain(cols), [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i)
                if (ids[i] >= 0 && ids[i] < limit) std::copy_n(src + i * cols, cols, dst + ids[i] * cols);
        });
    }
    // dst[ids[i]] += alpha * src[ids[i]]  (the same rows on both sides; ids without repeats);
    // with src == nullptr: dst[ids[i]] = 0
    template <class T>
    static void rows_axpy(index_t n, index_t cols, T alpha, const T* src, index_t limit, const std::int64_t* ids, T* dst) {
        launch();
        parallel_for(n, row_grain(cols), [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) {
                if (ids[i] < 0 || ids[i] >= limit) continue;
                T* d = dst + ids[i] * cols;
                if (!src) std::fill_n(d, cols, T(0));
                else for (index_t c = 0; c < cols; ++c) d[c] += alpha * src[ids[i] * cols + c];
            }
        });
    }

    // ---- dropout ----
    // mask[i] = (u_i >= p) / (1 - p), u_i the i-th uniform of the reserved stream.
    template <class T>
    static void dropout_mask(index_t n, T p, const Generator& gen, std::uint64_t first, T* mask) {
        const depthlab::detail::dropout_constants<T> d(p);
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::dropout_keep_mask(m, gen.seed(), first + static_cast<std::uint64_t>(o), d.threshold, d.keep, mask + o); });
    }

    // greedy decoding's choice per row: the log-softmax in double (elementwise::log_softmax_row,
    // as beam search), the first maximum, its log-probability and EOS's
    template <class T>
    static void greedy_pick(index_t rows, index_t V, const T* logits, std::int64_t eos, double* out) {
        launch();
        DEPTHLAB_CHECK(eos >= 0 && eos < V, index_error, "greedy_pick: EOS id ", eos, " outside the vocabulary [0, ", V, ")");
        std::vector<double> lp;
        for (index_t r = 0; r < rows; ++r) {
            elementwise::log_softmax_row(logits + r * V, V, lp);
            const auto best = std::max_element(lp.begin(), lp.end()) - lp.begin();
            out[3 * r] = static_cast<double>(best);
            out[3 * r + 1] = lp[static_cast<std::size_t>(best)];
            out[3 * r + 2] = lp[static_cast<std::size_t>(eos)];
        }
    }

    template <class T>
    static void beam_pick(index_t rows, index_t V, const T* logits, const double* base, index_t take, std::int64_t eos, double* out) {
        launch();
        DEPTHLAB_CHECK(eos >= 0 && eos < V, index_error, "beam_pick: EOS id ", eos, " outside the vocabulary [0, ", V, ")");
        DEPTHLAB_CHECK(take >= 1 && take <= V, shape_error, "beam_pick: ", take, " candidates a row from a vocabulary of ", V);
        std::vector<double> lp;
        std::vector<index_t> order(static_cast<std::size_t>(V));
        for (index_t r = 0; r < rows; ++r) {
            elementwise::log_softmax_row(logits + r * V, V, lp);
            for (auto& x : lp) x = base[r] + x;
            for (index_t v = 0; v < V; ++v) order[static_cast<std::size_t>(v)] = v;
            std::partial_sort(order.begin(), order.begin() + take, order.end(), [&](index_t a, index_t b) {
                return elementwise::beam_before(lp[static_cast<std::size_t>(a)], 0, a, lp[static_cast<std::size_t>(b)], 0, b);
            });
            double* o = out + r * (2 * take + 1);
            for (index_t c = 0; c < take; ++c) {
                const index_t v = order[static_cast<std::size_t>(c)];
                o[2 * c] = lp[static_cast<std::size_t>(v)];
                o[2 * c + 1] = static_cast<double>(v);
            }
            o[2 * take] = lp[static_cast<std::size_t>(eos)];
        }
    }

    // y = x * dropout_mask's value (y += with accumulate), the mask drawn for 1024 elements at a
    // time into a local buffer (K::dropout_keep_mask: Philox in vector lanes) and applied by the
    // product kernels mul / mul_acc: the same bits as the stored mask and a product, without the
    // mask (x may be y)
    template <class T>
    static void dropout_apply(index_t n, T p, const Generator& gen, std::uint64_t first, const T* x, T* y, bool accumulate = false) {
        const dropout_words<T> words(p, gen, first);
        chunked<T>(n, [&]<class K>(index_t b, index_t len) {
            for_each_piece<K>(words, b, len, [&](index_t o, index_t m, const T* mask) {
                if (!mask) {  // p 0: a mask of ones
                    if (accumulate) K::add(m, y + b + o, x + b + o, y + b + o);
                    else if (x != y) std::copy_n(x + b + o, m, y + b + o);
                } else if (accumulate) {
                    K::mul_acc(m, x + b + o, mask, y + b + o);
                } else {
                    K::mul(m, x + b + o, mask, y + b + o);
                }
            });
        });
    }
    /// Where the dropout masks of the elements [first, first + n) of a stream come from: p,
    /// gen's key, the first element's counter word (p 0: no mask at all).
    template <class T>
    struct dropout_words : depthlab::detail::dropout_constants<T> {
        dropout_words(T p, const Generator& gen, std::uint64_t first)
            : depthlab::detail::dropout_constants<T>(p), seed(gen.seed()), first(first), none(p == T(0)) {}
        std::uint64_t seed, first;
        bool none;
    };
    static constexpr index_t dropout_piece = 1024;
    /// f(offset, count, mask) over [begin, begin + n) of a stream in pieces of at most
    /// dropout_piece elements, each piece's mask drawn into a local buffer (null when the
    /// words say no dropout); offsets are relative to begin.
    template <class K, class T, class F>
    static void for_each_piece(const dropout_words<T>& words, index_t begin, index_t n, F&& f) {
        alignas(64) T mask[dropout_piece];
        for (index_t o = 0; o < n; o += dropout_piece) {
            const index_t m = std::min(dropout_piece, n - o);
            if (words.none) {
                f(o, m, static_cast<const T*>(nullptr));
                continue;
            }
            K::dropout_keep_mask(m, words.seed, words.first + static_cast<std::uint64_t>(begin + o), words.threshold, words.keep, mask);
            f(o, m, static_cast<const T*>(mask));
        }
    }

    // ---- optimiser updates (the element rules of backend/update_rules.hpp) ----
    template <class T, class F>
    static void for_each_index(index_t n, F&& body) {
        launch();
        parallel_for(n, elem_grain, [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) body(i);
        });
    }
    /// {sum_i f(i)[0], sum_i f(i)[1]} in double over fixed chunks added in order (the same
    /// bits for any thread count), written to out[0], out[1].
    template <class F>
    static void sum2_to(index_t n, F&& f, double* out) {
        const index_t nchunks = std::max<index_t>(1, (n + elem_grain - 1) / elem_grain);
        std::vector<std::array<double, 2>> part(static_cast<std::size_t>(nchunks), {0.0, 0.0});
        parallel_for(nchunks, 1, [&](index_t cb, index_t ce) {
            for (index_t c = cb; c < ce; ++c) {
                const index_t lo = c * elem_grain, hi = std::min(n, lo + elem_grain);
                double s0 = 0, s1 = 0;
                for (index_t i = lo; i < hi; ++i) {
                    const std::array<double, 2> v = f(i);
                    s0 += v[0];
                    s1 += v[1];
                }
                part[static_cast<std::size_t>(c)] = {s0, s1};
            }
        });
        double s0 = 0, s1 = 0;
        for (const auto& p : part) {
            s0 += p[0];
            s1 += p[1];
        }
        out[0] = s0;
        out[1] = s1;
    }
    template <class T>
    static void sgd_update(index_t n, T* w, const T* g, T* buf, const optim::rules::sgd<T>& rule) {
        for_each_index<T>(n, [=, &rule](index_t i) { rule(w[i], g[i], buf ? buf + i : nullptr); });
    }
    template <class T>
    static void adam_update(index_t n, T* w, const T* g, T* m, T* v, const optim::rules::adam<T>& rule) {
        for_each_index<T>(n, [=, &rule](index_t i) { rule(w[i], g[i], m[i], v[i]); });
    }
    // LAMB, pass 1: updates m and v; sums[0..2) = {||w||^2, ||u||^2}, u = direction + wd w
    template <class T>
    static void lamb_moments(index_t n, const T* w, const T* g, T* m, T* v, const optim::rules::adam_moments<T>& am, T wd,
                             double* sums) {
        launch();
        sum2_to(n, [=, &am](index_t i) {
            const T u = am.update(g[i], m[i], v[i]) + wd * w[i];
            const double wi = static_cast<double>(w[i]), ui = static_cast<double>(u);
            return std::array<double, 2>{wi * wi, ui * ui};
        }, sums);
    }
    // LAMB, pass 2: w -= (lr r) u, u recomputed from the updated m, v (the same arithmetic as
    // pass 1, so the same values; no buffer for u); r from `sums` (null: r = 1)
    template <class T>
    static void lamb_apply(index_t n, T* w, const T* m, const T* v, const optim::rules::adam_moments<T>& am, T wd, double lr,
                           const double* sums) {
        const T step = static_cast<T>(lr * optim::rules::lamb_trust_ratio(sums));
        for_each_index<T>(n, [=, &am](index_t i) {
            const T u = am.direction(m[i], v[i]) + wd * w[i];
            w[i] -= step * u;
        });
    }
    // out[0] = sum of squares of x[0..n) in double (fixed chunks, as sum2_to)
    template <class T>
    static void sum_squares_to(index_t n, const T* x, double* out) {
        launch();
        double two[2];
        sum2_to(n, [x](index_t i) {
            const double v = static_cast<double>(x[i]);
            return std::array<double, 2>{v * v, 0.0};
        }, two);
        out[0] = two[0];
    }
    // x *= clip_factor(clip_total(parts[0..k)), max_norm) when that factor is < 1
    template <class T>
    static void clip_scale(index_t n, T* x, const double* parts, index_t k, double max_norm) {
        const double f = optim::rules::clip_factor(optim::rules::clip_total(parts, k), max_norm);
        if (f < 1.0) axpby(n, static_cast<T>(f), x, T(0), x);
        else launch();
    }

    // ---- ACT's halting step (elementwise::act_halting) ----
    template <class T>
    static void act_halting_fwd(index_t n, const T* p, const T* cum, const T* r, const T* ra, const T* nh, T* w, T* cum_out, T* r_out) {
        launch();
        parallel_for(n, elem_grain, [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) {
                const auto o = elementwise::act_halting(p[i], cum[i], r[i], ra[i], nh[i]);
                w[i] = o.w;
                cum_out[i] = o.cum;
                r_out[i] = o.r;
            }
        });
    }
    template <class T>
    static void act_decide(index_t n, const T* p, const T* cum, const T* active, T threshold, int iteration, int min_iterations, T* ra, T* nh,
                           T* state) {
        launch();
        for (index_t i = 0; i < n; ++i)
            elementwise::act_decide(p[i], cum[i], active[i], threshold, iteration, min_iterations, ra[i], nh[i], state[2 * i], state[2 * i + 1]);
    }
    // (beta 0 never reads the gradient: a fresh buffer may hold anything, NaN included)
    template <class T>
    static void act_halting_bwd(index_t n, const T* ra, const T* nh, const T* dy, elementwise::halting_coefficient<T> ca, T* da, T beta_a,
                                elementwise::halting_coefficient<T> cb, T* db, T beta_b) {
        launch();
        parallel_for(n, elem_grain, [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) {
                if (da) da[i] = elementwise::halting_grad(ca, ra[i], nh[i], dy[i], beta_a, da[i]);
                if (db) db[i] = elementwise::halting_grad(cb, ra[i], nh[i], dy[i], beta_b, db[i]);
            }
        });
    }

    // ---- multi-tensor forms: the single-tensor routines in turn (so the same bits), counted
    // as the launches a device makes: one per pass over all the tensors ----
    template <class T>
    static void adam_update_many(index_t count, const optim::rules::adam_tensor<T>* t) {
        const one_launch pass;
        for (index_t i = 0; i < count; ++i) adam_update(t[i].n, t[i].w, t[i].g, t[i].m, t[i].v, t[i].rule);
    }
    template <class T>
    static void lamb_step_many(index_t count, const optim::rules::lamb_tensor<T>* t) {
        {
            const one_launch moments;
            for (index_t i = 0; i < count; ++i) lamb_moments(t[i].n, t[i].w, t[i].g, t[i].m, t[i].v, t[i].am, t[i].wd, t[i].sums);
        }
        const one_launch apply;
        for (index_t i = 0; i < count; ++i)
            lamb_apply(t[i].n, t[i].w, t[i].m, t[i].v, t[i].am, t[i].wd, t[i].lr, t[i].adapt ? t[i].sums : nullptr);
    }
    template <class T>
    static void sum_squares_many(index_t count, const optim::rules::tensor_span<T>* t, double* out) {
        const one_launch pass;
        for (index_t i = 0; i < count; ++i) sum_squares_to(t[i].n, t[i].x, out + i);
    }
    template <class T>
    static void clip_scale_many(index_t count, const optim::rules::tensor_span<T>* t, const double* parts, index_t k, double max_norm) {
        const one_launch pass;
        for (index_t i = 0; i < count; ++i) clip_scale(t[i].n, t[i].x, parts, k, max_norm);
    }

    // ---- GEMM ----
    template <class T>
    static void gemm(const gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
        launch_gemm(g);
        cpu::gemm(g, alpha, a, b, beta, c);
    }
    // c = op(a) op(b) + bias in every row (one product): the bias is the GEMM's epilogue
    template <class T>
    static void gemm_bias(const gemm_args& g, const T* a, const T* b, const T* bias, T* c) {
        launch_gemm(g);
        cpu::gemm_bias(g, a, b, bias, c);
    }
    // pre = op(a) op(b) + bias, c = gelu(pre): on a device one product with a GELU epilogue
    // that keeps its input, here gemm_bias then gelu_fwd (the same bits as the two ops)
    template <class T>
    static void gemm_bias_gelu(const gemm_args& g, const T* a, const T* b, const T* bias, T* pre, T* c) {
        check_gemm_bias_gelu(g, bias);
        const one_launch fused;
        gemm_bias(g, a, b, bias, pre);
        gelu_fwd(g.m * g.n, pre, c);
    }
    // c = op(a) op(b) + beta c and db = the column sums of dY = a (rows k, columns m), written:
    // on a device one product with a bias-gradient epilogue, here gemm then sum_rows_acc
    template <class T>
    static void gemm_bias_grad(const gemm_args& g, const T* a, const T* b, T beta, T* c, T* db) {
        check_gemm_bias_grad(g, db);
        const one_launch fused;
        gemm(g, T(1), a, b, beta, c);
        sum_rows_acc(g.k, g.m, a, db, false);
    }
    /// The CPU's products need no address tables: none are made (and nothing is launched).
    template <class T>
    static void gemm_address_tables(index_t count, const gemm_table_request<T>*, gemm_addresses* out) {
        for (index_t i = 0; i < count; ++i) out[i] = {};
    }
    /// out = the bf16 copy of the float operand src read in `layout`, for the products given it
    /// in gemm_args::a_bf16 / b_bf16 (a double operand has none: out is left empty).
    template <class T>
    static void prepare_bf16(const operand_layout& layout, const T* src, bf16_operand& out) {
        out = {};
        if constexpr (std::is_same_v<T, float>) {
            launch();
            out = cpu::prepare_bf16(layout, src);
        }
    }
};
}  // namespace cpu

template <>
struct primitives<backend::cpu> : cpu::host_primitives<backend::cpu> {};

}  // namespace depthlab
