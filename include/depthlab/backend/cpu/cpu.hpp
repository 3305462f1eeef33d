#pragma once
// primitives<backend::cpu>: the numerical routines behind every op, on host memory.
// Parallel over rows or chunks with OpenMP; the inner loops are the per-ISA kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cpu/gemm.hpp"
#include "depthlab/backend/cpu/kernels.hpp"
#include "depthlab/backend/cpu/memory.hpp"
#include "depthlab/core/parallel.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/shape.hpp"

namespace depthlab {

template <>
struct primitives<backend::cpu> {
    using B = backend::cpu;
    static constexpr index_t elem_grain = 1 << 15;  // elements per task for elementwise ops

    static index_t row_grain(index_t cols) { return std::max<index_t>(1, elem_grain / std::max<index_t>(cols, 1)); }

    // ---- elementwise ----
    template <class T>
    static void fill(index_t n, T v, T* y) {
        parallel_for(n, elem_grain, [&](index_t b, index_t e) { std::fill(y + b, y + e, v); });
    }
    /// dst (=|+=) src over an N-d shape with arbitrary strides on both sides.
    template <class T>
    static void copy_strided(const Shape& shape, const T* src, const Shape& sst, T* dst, const Shape& dst_st, bool accumulate) {
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
        cpu::with_isa<T>([&]<class K>() {
            parallel_for(n, elem_grain, [&](index_t b, index_t e) { f.template operator()<K>(b, e - b); });
        });
    }
    /// Runs `f<K>(row)` for every row in parallel.
    template <class T, class F>
    static void rowwise(index_t rows, index_t cols, F&& f) {
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
    static void sum_rows_acc(index_t rows, index_t cols, const T* x, T* v) {
        columnwise<T>(rows, cols, [&]<class K>(index_t c0, index_t nc) {
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

    // ---- activations: forward from x, backward accumulates into dx ----
    template <class T> static void gelu_fwd(index_t n, const T* x, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::gelu_fwd(m, x + o, y + o); });
    }
    template <class T> static void gelu_bwd(index_t n, const T* x, const T* dy, T* dx) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::gelu_bwd(m, x + o, dy + o, dx + o); });
    }
    template <class T> static void relu_fwd(index_t n, const T* x, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::relu_fwd(m, x + o, y + o); });
    }
    template <class T> static void relu_bwd(index_t n, const T* x, const T* dy, T* dx) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::relu_bwd(m, x + o, dy + o, dx + o); });
    }
    template <class T> static void tanh_fwd(index_t n, const T* x, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::tanh_fwd(m, x + o, y + o); });
    }
    // (from the output y)
    template <class T> static void tanh_bwd(index_t n, const T* y, const T* dy, T* dx) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::tanh_bwd(m, y + o, dy + o, dx + o); });
    }
    template <class T> static void sigmoid_fwd(index_t n, const T* x, T* y) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::sigmoid_fwd(m, x + o, y + o); });
    }
    // (from the output y)
    template <class T> static void sigmoid_bwd(index_t n, const T* y, const T* dy, T* dx) {
        chunked<T>(n, [&]<class K>(index_t o, index_t m) { K::sigmoid_bwd(m, y + o, dy + o, dx + o); });
    }
    // log σ(x) = min(x, 0) − log1p(exp(−|x|)): finite for every x, where σ itself rounds to 0
    // or 1. Used on per-token halting logits (thousands of values per step), so a scalar
    // loop is enough.
    template <class T> static void log_sigmoid_fwd(index_t n, const T* x, T* y) {
        for (index_t i = 0; i < n; ++i) y[i] = std::min(x[i], T(0)) - std::log1p(std::exp(-std::abs(x[i])));
    }
    // dx += dy · σ(−x)   (from the input x)
    template <class T> static void log_sigmoid_bwd(index_t n, const T* x, const T* dy, T* dx) {
        for (index_t i = 0; i < n; ++i) dx[i] += dy[i] / (T(1) + std::exp(x[i]));
    }

    // ---- reductions ----
    // The chunks depend on n only (never on the thread count), and their partial sums are
    // added in chunk order: the result has the same bits for any OMP_NUM_THREADS.
    template <class T>
    static T sum(index_t n, const T* x) {
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
        return static_cast<T>(s);
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
                              T* dx, T* dgamma, T* dbeta) {
        if (dx)
            rowwise<T>(rows, cols, [&]<class K>(index_t r) {
                K::layernorm_bwd_row(cols, x + r * cols, dy + r * cols, gamma, mean[r], rstd[r], dx + r * cols);
            });
        if (dgamma && dbeta)
            columnwise<T>(rows, cols, [&]<class K>(index_t c0, index_t nc) {
                for (index_t r = 0; r < rows; ++r)
                    K::layernorm_param_grad_row(nc, x + r * cols + c0, dy + r * cols + c0, mean[r], rstd[r], dgamma + c0, dbeta + c0);
            });
    }

    // ---- cross-entropy over rows of logits (rows, V) ----
    // loss[r] = (1-eps)(lse - x[t]) + eps (lse - mean_j x[j]); rows with t == ignore get 0.
    // Targets were range-checked by the caller.
    template <class T>
    static void cross_entropy_fwd(index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore,
                                  T smoothing, T* loss, T* lse) {
        rowwise<T>(rows, V, [&]<class K>(index_t r) {
            const T* x = logits + r * V;
            const T l = K::log_softmax_row(V, x, nullptr);
            lse[r] = l;
            if (target[r] == ignore) {
                loss[r] = T(0);
                return;
            }
            T value = (T(1) - smoothing) * (l - x[target[r]]);
            if (smoothing != T(0)) value += smoothing * (l - K::sum(V, x) / static_cast<T>(V));
            loss[r] = value;
        });
    }
    // dlogits[r] += g[r] * (softmax(x) - (1-eps) onehot(t) - eps/V); ignored rows untouched.
    template <class T>
    static void cross_entropy_bwd(index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore,
                                  T smoothing, const T* lse, const T* g, T* dlogits) {
        rowwise<T>(rows, V, [&]<class K>(index_t r) {
            if (target[r] == ignore) return;
            const T* x = logits + r * V;
            T* d = dlogits + r * V;
            const T gr = g[r], l = lse[r], uniform = smoothing / static_cast<T>(V);
            for (index_t j = 0; j < V; ++j) d[j] += gr * (std::exp(x[j] - l) - uniform);
            d[target[r]] -= gr * (T(1) - smoothing);
        });
    }

    // ---- rows by index ----
    // out[i] = table[ids[i]]   (ids range-checked by the caller)
    template <class T>
    static void gather_rows(index_t n, index_t cols, const T* table, const std::int64_t* ids, T* out) {
        parallel_for(n, row_grain(cols), [&](index_t b, index_t e) {
            for (index_t i = b; i < e; ++i) std::copy_n(table + ids[i] * cols, cols, out + i * cols);
        });
    }
    // table[ids[i]] += src[i]  (repeated ids accumulate; threads own column blocks)
    template <class T>
    static void scatter_add_rows(index_t n, index_t cols, const T* src, const std::int64_t* ids, T* table) {
        columnwise<T>(n, cols, [&]<class K>(index_t c0, index_t nc) {
            for (index_t i = 0; i < n; ++i) K::add(nc, table + ids[i] * cols + c0, src + i * cols + c0, table + ids[i] * cols + c0);
        });
    }

    // ---- dropout ----
    // mask[i] = (u_i >= p) / (1 - p), u_i the i-th uniform of the reserved stream.
    template <class T>
    static void dropout_mask(index_t n, T p, const Generator& gen, std::uint64_t first, T* mask) {
        const T keep = T(1) / (T(1) - p);
        const auto threshold = static_cast<std::uint64_t>(static_cast<double>(p) * 4294967296.0);
        parallel_for((n + 3) / 4, elem_grain / 4, [&](index_t b, index_t e) {
            for (index_t blk = b; blk < e; ++blk) {
                const auto w = gen.block((first >> 2) + static_cast<std::uint64_t>(blk));
                for (index_t j = 0; j < 4 && blk * 4 + j < n; ++j)
                    mask[blk * 4 + j] = w[static_cast<std::size_t>(j)] >= threshold ? keep : T(0);
            }
        });
    }

    // ---- GEMM ----
    template <class T>
    static void gemm(const cpu::gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
        cpu::gemm(g, alpha, a, b, beta, c);
    }
};

}  // namespace depthlab
