#pragma once
// Strided-batched GEMM on the CPU, row-major:
//   C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b],  op(X) = X or X^T,
// A[b] = A + b*stride_a (stride 0 broadcasts one matrix to every batch entry).
// gemm_bias (a linear layer, one product): C = op(A) * op(B) + 1 bias^T, the bias added by
// oneDNN as it writes C rather than pre-filled into C and accumulated on.
// float goes through a oneDNN matmul primitive created once per shape and kept in a
// least-recently-used cache (DEPTHLAB_GEMM_CACHE entries, default 4096: shapes that change
// every batch must not pile up primitives without bound);
// double (the gradient-check precision) and builds without oneDNN go through Eigen.
// Under matmul_precision::bf16 (backend/precision.hpp) float operands are packed into dense
// bf16 copies first and oneDNN multiplies bf16 x bf16 -> f32; builds without oneDNN round the
// operands to bf16 values and multiply in f32, which gives the same numbers up to summation
// order (slowly: there is no bf16 GEMM in Eigen).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>

#include <Eigen/Core>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/cpu/bf16.hpp"
#include "depthlab/backend/cpu/memory.hpp"
#include "depthlab/backend/precision.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/core/parallel.hpp"
#include "depthlab/core/shape.hpp"

#if defined(DEPTHLAB_HAVE_ONEDNN)
#include <oneapi/dnnl/dnnl.hpp>
#if !defined(DNNL_VERSION_MAJOR) || DNNL_VERSION_MAJOR != 2
#error "depthlab's oneDNN path targets the oneDNN 2.x API (Debian 12 ships 2.6); configure with -DDEPTHLAB_WITH_ONEDNN=OFF"
#endif
#endif

namespace depthlab::cpu {

using depthlab::gemm_args;

using depthlab::check_gemm;
using depthlab::check_gemm_bias;

/// One C matrix made ready for a product to be accumulated on it: the bias in every row
/// (gemm_bias: alpha 1, beta 0), else beta C (cleared when beta is 0: C may hold garbage).
/// With k = 0 (an empty sum) this is the whole product.
template <class T>
void gemm_prepare_c(const gemm_args& g, T beta, T* c, const T* bias) {
    for (index_t r = 0; r < g.m; ++r) {
        T* row = c + r * g.ldc;
        if (bias) std::copy(bias, bias + g.n, row);
        else if (beta == T(0)) std::fill(row, row + g.n, T(0));
        else if (beta != T(1))
            for (index_t col = 0; col < g.n; ++col) row[col] *= beta;
    }
}

/// Eigen path: any scalar type; batches in parallel when they are many and small.
template <class T>
void gemm_eigen(const gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c, const T* bias = nullptr) {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
    using MMap = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
    auto one = [&](index_t flat) {
        const index_t j = flat / g.batch, i = flat % g.batch;
        const T* a0 = a + j * g.stride_a2;
        const T* b0 = b + j * g.stride_b2;
        T* c0 = c + j * g.stride_c2;
        const CMap A(a0 + i * g.stride_a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, Eigen::OuterStride<>(g.lda));
        const CMap Bm(b0 + i * g.stride_b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, Eigen::OuterStride<>(g.ldb));
        gemm_prepare_c(g, beta, c0 + i * g.stride_c, bias);
        if (g.k == 0) return;
        MMap C(c0 + i * g.stride_c, g.m, g.n, Eigen::OuterStride<>(g.ldc));
        if (!g.trans_a && !g.trans_b) C.noalias() += alpha * (A * Bm);
        else if (g.trans_a && !g.trans_b) C.noalias() += alpha * (A.transpose() * Bm);
        else if (!g.trans_a && g.trans_b) C.noalias() += alpha * (A * Bm.transpose());
        else C.noalias() += alpha * (A.transpose() * Bm.transpose());
    };
    const index_t total = g.batch * g.batch2;
    if (total > 1 && g.m * g.n * g.k < (index_t{1} << 18)) {
        parallel_for(total, 1, [&](index_t f0, index_t f1) {
            for (index_t f = f0; f < f1; ++f) one(f);
        });
    } else {
        for (index_t f = 0; f < total; ++f) one(f);
    }
}

#if defined(DEPTHLAB_HAVE_ONEDNN)
namespace onednn {

inline dnnl::engine& engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}
/// One stream per thread: callers may run independent GEMMs from inside a parallel region
/// (e.g. one sequence each), and a oneDNN stream must not be shared by concurrent calls.
inline dnnl::stream& stream() {
    thread_local dnnl::stream s(engine());
    return s;
}

struct matmul_key {
    std::array<index_t, 19> v;
    float alpha, beta;
    bool operator==(const matmul_key& o) const { return v == o.v && alpha == o.alpha && beta == o.beta; }
};
struct matmul_key_hash {
    std::size_t operator()(const matmul_key& k) const {
        std::size_t h = 1469598103934665603ull;
        for (index_t x : k.v) h = (h ^ static_cast<std::size_t>(x)) * 1099511628211ull;
        return h ^ std::hash<float>{}(k.alpha) ^ (std::hash<float>{}(k.beta) << 1);
    }
};

struct matmul_entry {
    dnnl::matmul prim;
    dnnl::memory::desc a, b, c, scratchpad, bias;
};

/// The memory descriptor of one operand: dims (batch2, batch, rows, cols) with strides;
/// a batch stride of 0 broadcasts (extent 1 for oneDNN).
inline dnnl::memory::desc operand(index_t batch2, index_t stride2, index_t batch, index_t stride, index_t rows, index_t cols,
                                  bool trans, index_t ld, dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
    using dims = dnnl::memory::dims;
    const index_t bdim = stride == 0 ? 1 : batch, b2dim = stride2 == 0 ? 1 : batch2;
    const index_t s1 = stride == 0 ? rows * cols : stride;
    const index_t s2 = stride2 == 0 ? s1 * bdim : stride2;
    const dims shape{b2dim, bdim, rows, cols};
    const dims strides{s2, s1, trans ? 1 : ld, trans ? ld : 1};
    return dnnl::memory::desc(shape, type, strides);
}

/// The bias of a bias epilogue: n f32 values, one per column of C, shared by every row and
/// batch entry.
inline dnnl::memory::desc bias_operand(index_t n) {
    return dnnl::memory::desc(dnnl::memory::dims{1, 1, 1, n}, dnnl::memory::data_type::f32, dnnl::memory::dims{n, n, n, 1});
}

/// Primitives by shape, least recently used evicted first. Entries are handed out by value
/// (a primitive is a reference-counted handle), so eviction never invalidates a caller's.
class primitive_cache {
public:
    primitive_cache() {
        if (const char* e = std::getenv("DEPTHLAB_GEMM_CACHE")) capacity_ = std::max<std::size_t>(1, std::strtoull(e, nullptr, 10));
    }
    static primitive_cache& instance() {
        static primitive_cache* c = new primitive_cache();  // leaked: used until the very end
        return *c;
    }
    /// Primitive for this shape: created on first use, then reused (creation costs far more
    /// than a small matmul). Thread-safe.
    /// serial: a primitive planned for one thread (see gemm_fixed_grid), cached apart;
    /// bf16: inputs in bf16 (output f32), cached apart; bias: a bias epilogue (an f32 row
    /// vector added to every row of C), cached apart.
    matmul_entry get(const gemm_args& g, float alpha, float beta, bool serial = false, bool bf16 = false, bool bias = false) {
        const matmul_key key{{g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch, g.stride_a, g.stride_b,
                              g.stride_c, g.batch2, g.stride_a2, g.stride_b2, g.stride_c2, serial, bf16, bias},
                             alpha,
                             beta};
        std::lock_guard<std::mutex> lock(mutex_);
        if (auto it = map_.find(key); it != map_.end()) {
            order_.splice(order_.begin(), order_, it->second.second);  // now the most recent
            return it->second.first;
        }
        const auto t0 = std::chrono::steady_clock::now();
        matmul_entry e = [&] {
            if (!serial) return create(g, alpha, beta, bf16, bias);
            const scoped_num_threads one(1);  // oneDNN plans its work split for the threads it sees now
            return create(g, alpha, beta, bf16, bias);
        }();
        ++made_;
        making_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        order_.push_front(key);
        map_.emplace(key, std::make_pair(e, order_.begin()));
        evict_over_capacity();
        return e;
    }
    [[nodiscard]] std::size_t size() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return map_.size();
    }
    [[nodiscard]] std::size_t capacity() const { return capacity_; }
    /// Primitives created so far (every miss) and the seconds their creation took.
    [[nodiscard]] std::size_t made() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return made_;
    }
    [[nodiscard]] double making_seconds() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return making_seconds_;
    }
    void set_capacity(std::size_t n) {
        std::lock_guard<std::mutex> lock(mutex_);
        capacity_ = std::max<std::size_t>(1, n);
        evict_over_capacity();
    }

private:
    void evict_over_capacity() {  // (mutex held) least recently used first
        while (map_.size() > capacity_) {
            map_.erase(order_.back());
            order_.pop_back();
        }
    }
    static matmul_entry create(const gemm_args& g, float alpha, float beta, bool bf16, bool bias) {
        const auto in = bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
        const auto a = operand(g.batch2, g.stride_a2, g.batch, g.stride_a, g.m, g.k, g.trans_a, g.lda, in);
        const auto b = operand(g.batch2, g.stride_b2, g.batch, g.stride_b, g.k, g.n, g.trans_b, g.ldb, in);
        const auto c = operand(g.batch2, g.stride_c2, g.batch, g.stride_c, g.m, g.n, false, g.ldc);
        dnnl::primitive_attr attr;
        // The caller hands each execution its own scratchpad: one primitive runs on several
        // threads at once (the tiles and k-groups of one product), and a scratchpad shared
        // by the library between them corrupts results (seen with the bf16 brgemm kernels,
        // which copy a transposed A there).
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
        if (beta != 0.0f) {
            dnnl::post_ops po;
            po.append_sum(beta);
            attr.set_post_ops(po);
        }
        // (oneDNN adds the bias before the output scale: gemm_bias products have alpha 1)
        const dnnl::memory::desc bias_desc = bias ? bias_operand(g.n) : dnnl::memory::desc();
        const dnnl::matmul::desc desc = bias ? dnnl::matmul::desc(a, b, bias_desc, c) : dnnl::matmul::desc(a, b, c);
        const dnnl::matmul::primitive_desc pd(desc, attr, engine());
        return matmul_entry{dnnl::matmul(pd), a, b, c, pd.scratchpad_desc(), bias_desc};
    }
    mutable std::mutex mutex_;
    // The compact ACT step of ACT-ALBERT multiplies a different number of running rows in each
    // iteration of each batch, so its products come in thousands of shapes (tiles and k-groups
    // included): 3 400 after 400 deep-phase steps, most of them recurring. 1024 entries
    // thrashed: ~40 primitives made per step, 0.4-0.5 ms each, 10-13% of the step (AMD EPYC,
    // 2 threads, 2026-12-04: albert_act's "GEMM primitives" line, docs/performance.md); 4096 entries made as
    // few there as 8192. A primitive holds its JIT code and kernels, ~40 KB resident: at 8192
    // entries `scripts/demo`, whose shallower model meets even more row counts, peaked at
    // 1031 MiB (726 MiB at 1024), over its 1 GiB goal; at 4096, 848 MiB with the same results.
    // A whole hour at 4096 still thrashed (183 185 made, 89 s), so the compact path now pads
    // its row counts to multiples of act_options::row_quantum (16): 1/16 of the row counts.
    std::size_t capacity_ = 4096;
    std::size_t made_ = 0;
    double making_seconds_ = 0;
    std::list<matmul_key> order_;  // most recent first
    std::unordered_map<matmul_key, std::pair<matmul_entry, std::list<matmul_key>::iterator>, matmul_key_hash> map_;
};

/// Whether this oneDNN multiplies bf16 on this CPU (natively or by its own emulation on
/// AVX-512 CPUs without BF16); where it cannot (AVX2-only CPUs), bf16 precision falls back
/// to bf16-rounded operands in an f32 GEMM: the same numbers up to summation order.
inline bool bf16_supported() {
    static const bool ok = [] {
        try {
            const gemm_args g{.m = 16, .n = 16, .k = 16, .lda = 16, .ldb = 16, .ldc = 16};
            (void)primitive_cache::instance().get(g, 1.0f, 0.0f, false, true);
            return true;
        } catch (const dnnl::error&) {
            return false;
        }
    }();
    return ok;
}

template <class In>
void gemm(const gemm_args& g, float alpha, const In* a, const In* b, float beta, float* c, bool serial = false,
          const float* bias = nullptr) {
    const matmul_entry e = primitive_cache::instance().get(g, alpha, beta, serial, bf16_inputs<In>, bias != nullptr);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(e.a, engine(), const_cast<In*>(a))},
                                               {DNNL_ARG_WEIGHTS, dnnl::memory(e.b, engine(), const_cast<In*>(b))},
                                               {DNNL_ARG_DST, dnnl::memory(e.c, engine(), c)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.bias, engine(), const_cast<float*>(bias)));
    std::shared_ptr<std::uint8_t> scratch;  // (the block cache reuses it)
    if (const std::size_t bytes = e.scratchpad.get_size(); bytes != 0) {
        scratch = memory<backend::cpu>::allocate<std::uint8_t>(bytes);
        args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(e.scratchpad, engine(), scratch.get()));
    }
    e.prim.execute(stream(), args);
    stream().wait();
}

}  // namespace onednn
#endif
/// k = 0, an empty sum: every C matrix of the batch made ready (gemm_prepare_c) and no more.
template <class T>
void gemm_empty_k(const gemm_args& g, T beta, T* c, const T* bias) {
    for (index_t j = 0; j < g.batch2; ++j)
        for (index_t i = 0; i < g.batch; ++i) gemm_prepare_c(g, beta, c + j * g.stride_c2 + i * g.stride_c, bias);
}

/// One GEMM, by oneDNN (float, or bf16 inputs with a float output) or Eigen; `serial`:
/// planned and run on one thread (some oneDNN implementations and Eigen choose their
/// threads when they run, not when planned).
template <class T, class In>
void gemm_backend(const gemm_args& g, T alpha, const In* a, const In* b, T beta, T* c, bool serial, const T* bias = nullptr) {
    if (serial && max_threads() > 1) {
        const scoped_num_threads one(1);
        gemm_backend(g, alpha, a, b, beta, c, true, bias);
        return;
    }
    if constexpr (bf16_inputs<In>) {
#if defined(DEPTHLAB_HAVE_ONEDNN)
        onednn::gemm(g, alpha, a, b, beta, c, serial, bias);  // (callers pack only when k > 0)
#else
        static_assert(!bf16_inputs<In>, "bf16 GEMM inputs need oneDNN");
#endif
    } else {
#if defined(DEPTHLAB_HAVE_ONEDNN)
        if constexpr (std::is_same_v<T, float>) {
            // (an `else` branch of its own: Eigen's float product, 1-2 s of compile time in
            // every translation unit, is then never instantiated when oneDNN does the work)
            if (g.k > 0) onednn::gemm(g, alpha, a, b, beta, c, serial, bias);
            else gemm_empty_k(g, beta, c, bias);
        } else
#endif
        {
            gemm_eigen(g, alpha, a, b, beta, c, bias);
        }
    }
}

// Every single product is cut into a fixed grid of tasks, each computed on one thread, the
// tasks in parallel. The grid is a function of the product's shape only, never of the thread
// count: a library left to split a product itself splits its rows (and, for weight gradients,
// the k-sum) by the thread count, its row-tail kernels round differently from its main
// kernels, and the bits of the result then depend on OMP_NUM_THREADS.
//
// Output tiles: at most 8, rows in blocks of >= 128, columns of >= 256. Tiles rather than
// finer blocks: each tile re-packs its panel of B. An odd tile count leaves a thread of an
// even team idle for the last tile (3 tiles on 2 threads run at 75%, 1 tile at 50%): the
// compact ACT path's late iterations, with a few hundred running tokens, are such products.
// So an odd grid gets one more row of tiles where the rows stay >= min_tile_rows.
inline constexpr index_t max_tiles = 8;
inline constexpr index_t min_tile_rows = 32;
struct tile_grid {
    index_t rows, cols;  // tiles along m and along n
    index_t groups = 1;  // k-groups (below)
};
inline tile_grid tiles_of(const gemm_args& g) {
    index_t rows = std::clamp<index_t>(g.m / 128, 1, max_tiles);
    const index_t cols = std::clamp<index_t>(g.n / 256, 1, max_tiles / rows);
    if ((rows * cols) % 2 == 1 && (rows + 1) * cols <= max_tiles && g.m / (rows + 1) >= min_tile_rows) ++rows;
    return {rows, cols};
}

// k-groups: weight gradients, where k is the number of tokens and far exceeds m and n, can
// have too few output tiles to keep many cores busy; there k is also cut into groups, each
// group's product goes to an (m, n) buffer of its own, and the groups are added in order.
// A group writes and re-reads its whole output, so groups are kept long: at least
// min_group_k, except for small outputs (a halting unit's (1, d) weight gradient: a
// memory-bound product whose buffers cost nothing), where they are at least
// min_small_group_k. On 2 cores (AMD EPYC, AVX-512, bf16) one tile's full k beat 8 k-groups
// of the same product by 1.2-2.9x at 512-1536 tokens, the compact ACT step's sizes, and by
// 7-30% at 2048-4096 (throwaway probe, 2026-12-04); groups of >= 2048 keep the many-core
// case parallel.
inline constexpr index_t min_group_k = 2048;
inline constexpr index_t min_small_group_k = 256;
inline constexpr index_t small_output = 4096;  // m * n
/// A weight gradient's shape: k (the tokens) at least twice the output's larger side.
inline bool k_dominates(const gemm_args& g) { return g.k >= 2 * std::max(g.m, g.n); }
inline index_t k_groups_of(const gemm_args& g, index_t tiles) {
    if (!k_dominates(g)) return 1;
    const index_t min_k = g.m * g.n <= small_output ? min_small_group_k : min_group_k;
    return std::clamp<index_t>(g.k / min_k, 1, std::max<index_t>(1, max_tiles / tiles));
}

// A weight gradient's transposed A under bf16: oneDNN 2.6 multiplies a transposed bf16 A on
// its brgemm kernels only when A, B and C are all dense (each leading dimension its matrix's
// width); a tile of a wider product goes to its older gemm:jit kernels, 5-17% slower on one
// thread (probe and DNNL_VERBOSE, AMD EPYC Zen 5, 2026-12-07). So such a product, when its k
// is long enough for k-groups, is one tile cut into an even number of k-groups of at least
// min_dense_group_k (each group's output a dense buffer of its own): shorter groups than the
// row tiles' because they are the only parallelism left, and brgemm ran 303, 325 and 345
// GFLOP/s on one thread at k = 2048, 1024 and 512 (768 x k x 256), so the extra sum pays.
inline constexpr index_t min_dense_group_k = 1024;

/// The grid of a single product whose A and B elements are In (T: the output's type).
template <class T, class In>
tile_grid grid_of(const gemm_args& g) {
    tile_grid t = tiles_of(g);
    t.groups = k_groups_of(g, t.rows * t.cols);
    if constexpr (!std::is_same_v<In, T>) {
        const bool dense = g.lda == g.m && g.ldb == (g.trans_b ? g.k : g.n);
        const index_t groups = std::min<index_t>(g.k / min_dense_group_k, max_tiles) / 2 * 2;
        if (g.trans_a && dense && k_dominates(g) && groups >= 2) return {1, 1, groups};
    }
    return t;
}

/// A's f32 rows that a bf16 product rounds inside its tile tasks (rows_of_a_in_tiles): the
/// source, its leading dimension, and the dense rows (ld = k) that the product then reads as A.
template <class In>
struct rows_to_round {
    const float* src = nullptr;
    index_t ld = 0;
    In* dst = nullptr;
};

template <class T, class In>
void gemm_fixed_grid(const gemm_args& g, T alpha, const In* a, const In* b, T beta, T* c, const T* bias = nullptr,
                     rows_to_round<In> a_from = {}) {
    const tile_grid t = grid_of<T, In>(g);
    const index_t tiles = t.rows * t.cols, groups = t.groups;
    const std::size_t mn = static_cast<std::size_t>(g.m * g.n);
    std::shared_ptr<T> parts;  // (groups > 1) group i's product at i * mn, ld n
    if (groups > 1) parts = memory<backend::cpu>::template allocate<T>(mn * static_cast<std::size_t>(groups));
    struct task_at {
        gemm_args s;
        index_t m0, n0, k0, group;
    };
    const auto task = [&](index_t i) {
        const index_t group = i / tiles, r = (i % tiles) / t.cols, q = i % t.cols;
        task_at w{g, g.m * r / t.rows, g.n * q / t.cols, g.k * group / groups, group};
        w.s.m = g.m * (r + 1) / t.rows - w.m0;
        w.s.n = g.n * (q + 1) / t.cols - w.n0;
        w.s.k = g.k * (group + 1) / groups - w.k0;
        if (groups > 1) w.s.ldc = g.n;
        return w;
    };
#if defined(DEPTHLAB_HAVE_ONEDNN)
    if constexpr (std::is_same_v<T, float>) {  // plan the (at most eight) task shapes before the parallel region
        for (index_t group : {index_t{0}, groups - 1})
            for (index_t i : {index_t{0}, t.cols - 1, (t.rows - 1) * t.cols, tiles - 1}) {
                const gemm_args s = task(group * tiles + i).s;
                if (groups > 1) (void)onednn::primitive_cache::instance().get(s, 1.0f, 0.0f, true, bf16_inputs<In>);
                else (void)onednn::primitive_cache::instance().get(s, alpha, beta, true, bf16_inputs<In>, bias != nullptr);
            }
    }
#endif
    parallel_for(tiles * groups, 1, [&](index_t i0, index_t i1) {
        for (index_t i = i0; i < i1; ++i) {
            const task_at w = task(i);
            if constexpr (std::is_same_v<T, float>)
                if (a_from.src != nullptr)  // this task's rows of A, rounded now and read from cache next
                    for (index_t r = w.m0; r < w.m0 + w.s.m; ++r) to_bf16(a_from.src + r * a_from.ld, a_from.dst + r * g.lda, g.k);
            const In* ai = g.trans_a ? a + w.k0 * g.lda + w.m0 : a + w.m0 * g.lda + w.k0;  // op(A)[m0.., k0..]
            const In* bi = g.trans_b ? b + w.n0 * g.ldb + w.k0 : b + w.k0 * g.ldb + w.n0;  // op(B)[k0.., n0..]
            if (groups == 1)
                gemm_backend(w.s, alpha, ai, bi, beta, c + w.m0 * g.ldc + w.n0, true, bias ? bias + w.n0 : nullptr);
            else
                gemm_backend(w.s, T(1), ai, bi, T(0), parts.get() + static_cast<std::size_t>(w.group) * mn + w.m0 * g.n + w.n0, true);
        }
    });
    if (groups == 1) return;
    // c = alpha * (sum of the groups, in order) + beta * c   (beta == 0 never reads c), + bias
    T* const part = parts.get();
    parallel_for(g.m, std::max<index_t>(1, (index_t{1} << 15) / std::max<index_t>(g.n, 1)), [&](index_t r0, index_t r1) {
        for (index_t r = r0; r < r1; ++r) {
            T* sum = part + r * g.n;  // group 0's row accumulates the others, in group order
            for (index_t i = 1; i < groups; ++i) {
                const T* p = part + static_cast<std::size_t>(i) * mn + r * g.n;
                for (index_t j = 0; j < g.n; ++j) sum[j] += p[j];
            }
            T* out = c + r * g.ldc;
            if (bias) for (index_t j = 0; j < g.n; ++j) out[j] = sum[j] + bias[j];  // (alpha 1, beta 0)
            else if (beta == T(0)) for (index_t j = 0; j < g.n; ++j) out[j] = alpha * sum[j];
            else for (index_t j = 0; j < g.n; ++j) out[j] = alpha * sum[j] + beta * out[j];
        }
    });
}

/// A single product (batch 1) has the same bits for any thread count; batched products
/// (attention) are left to the library, one matrix per task.
template <class T, class In>
void gemm_dispatch(const gemm_args& g, T alpha, const In* a, const In* b, T beta, T* c, const T* bias = nullptr) {
    if (g.batch != 1 || g.batch2 != 1 || g.k == 0) gemm_backend(g, alpha, a, b, beta, c, false, bias);
    else gemm_fixed_grid(g, alpha, a, b, beta, c, bias);
}

/// g with its A and B read from dense packed copies.
inline gemm_args with_packed(gemm_args g, const operand_layout& a, const operand_layout& b) {
    g.lda = a.ld;
    g.stride_a = a.stride;
    g.stride_a2 = a.stride2;
    g.ldb = b.ld;
    g.stride_b = b.stride;
    g.stride_b2 = b.stride2;
    return g;
}

/// Runs f with the element type of this build's bf16 GEMM inputs: bf16 bits where oneDNN
/// multiplies bf16, else bf16 values held in floats (an f32 GEMM on rounded operands).
template <class F>
decltype(auto) with_bf16_input_type(F&& f) {
#if defined(DEPTHLAB_HAVE_ONEDNN)
    if (onednn::bf16_supported()) return f(static_cast<bf16_bits*>(nullptr));
#endif
    return f(static_cast<float*>(nullptr));
}

/// The dense bf16 copy of an operand (bf16_operand), made once for several products.
inline bf16_operand prepare_bf16(const operand_layout& layout, const float* src) {
    return with_bf16_input_type([&]<class Packed>(Packed*) {
        packed_operand<Packed> p = pack_operand<Packed>(src, layout);
        return bf16_operand{.source = src, .layout = layout, .data = std::move(p.data), .packed = p.layout};
    });
}

/// The operand of a bf16 product: the copy made beforehand when it is this operand's, else
/// a fresh one.
template <class Packed>
packed_operand<Packed> bf16_input(const bf16_operand* made, const float* src, const operand_layout& layout) {
    if (made != nullptr && made->serves(src, layout)) return {std::static_pointer_cast<Packed>(made->data), made->packed};
    return pack_operand<Packed>(src, layout);
}

/// Whether a single bf16 product rounds A's rows inside its tile tasks instead of in a pass of
/// their own: A has no copy made beforehand and is not transposed, and each row of A belongs
/// to exactly one task (one column of tiles, no k-groups, more than one tile). A standalone
/// product then reads each task's rows of A from cache right after rounding them, with no
/// separate parallel pass (the matmul op's per-call conversion).
template <class Packed>
bool rows_of_a_in_tiles(const gemm_args& g, const float* a) {
    if (g.trans_a || g.batch != 1 || g.batch2 != 1 || g.k == 0) return false;
    if (g.a_bf16 != nullptr && g.a_bf16->serves(a, layout_a(g))) return false;
    gemm_args dense = g;
    dense.lda = g.k;
    const tile_grid t = grid_of<float, Packed>(dense);
    return t.cols == 1 && t.groups == 1 && t.rows > 1;
}

/// C = alpha op(A) op(B) + beta C with A and B rounded to bf16 and f32 accumulation.
inline void gemm_bf16(const gemm_args& g, float alpha, const float* a, const float* b, float beta, float* c,
                      const float* bias = nullptr) {
    with_bf16_input_type([&]<class Packed>(Packed*) {
        const auto pb = bf16_input<Packed>(g.b_bf16, b, layout_b(g));
        if (rows_of_a_in_tiles<Packed>(g, a)) {
            const auto rows = memory<backend::cpu>::template allocate<Packed>(static_cast<std::size_t>(g.m * g.k));
            const operand_layout dense{.rows = g.m, .cols = g.k, .ld = g.k};
            gemm_fixed_grid(with_packed(g, dense, pb.layout), alpha, static_cast<const Packed*>(rows.get()), pb.data.get(), beta, c, bias,
                            rows_to_round<Packed>{.src = a, .ld = g.lda, .dst = rows.get()});
            return;
        }
        const auto pa = bf16_input<Packed>(g.a_bf16, a, layout_a(g));
        gemm_dispatch(with_packed(g, pa.layout, pb.layout), alpha, pa.data.get(), pb.data.get(), beta, c, bias);
    });
}

/// gemm and gemm_bias: checks, bf16 packing, then the fixed-grid dispatch.
template <class T>
void gemm_checked(const gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c, const T* bias) {
    check_gemm(g);
    if (g.m == 0 || g.n == 0) return;
    if constexpr (std::is_same_v<T, float>) {
        if (bf16_product(g)) {
            gemm_bf16(g, alpha, a, b, beta, c, bias);
            return;
        }
    }
    gemm_dispatch(g, alpha, a, b, beta, c, bias);
}

/// The GEMM every op uses.
template <class T>
void gemm(const gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c) {
    gemm_checked(g, alpha, a, b, beta, c, static_cast<const T*>(nullptr));
}

/// C = op(A) op(B) + bias broadcast over the rows (bias: n values), written, never read:
/// a linear layer's forward product. One product (batch 1).
template <class T>
void gemm_bias(const gemm_args& g, const T* a, const T* b, const T* bias, T* c) {
    check_gemm_bias(g, bias);
    gemm_checked(g, T(1), a, b, T(0), c, bias);
}

}  // namespace depthlab::cpu
