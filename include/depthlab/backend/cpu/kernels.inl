// Body of `struct kernels<T, ISA>` — included once per (T, ISA) inside a target region by
// kernels.hpp, with `T` (float or double) and `V` (= Vec<T, ISA>) already declared.
// Every kernel works on one contiguous chunk; the caller parallelises over chunks or rows.
// Backward kernels accumulate (`dx +=`) so that a value used twice needs no special case.
// No include guard on purpose: scripts/amalgamate inlines .inl files at every inclusion.

static constexpr int W = V::width;

// ---- vector math (written once over V; the one-lane path uses libm for exactness) ----
template <class U = V>  // a template, so that the untaken branch is not compiled
static DEPTHLAB_VEC_INLINE U vexp(U x) {
    if constexpr (W == 1) {
        return {std::exp(x.v)};
    } else {
        // Cephes-style expf: exp(x) = 2^n * exp(r), r = x - n ln2, |r| <= ln2/2.
        x = U::min(U::max(x, U::set1(T(-87.3))), U::set1(T(88.7)));
        const V n = V::round(x * V::set1(T(1.44269504088896341)));
        V r = V::fma(n, V::set1(T(-0.693359375)), x);
        r = V::fma(n, V::set1(T(2.12194440e-4)), r);
        V p = V::set1(T(1.9875691500E-4));
        p = V::fma(p, r, V::set1(T(1.3981999507E-3)));
        p = V::fma(p, r, V::set1(T(8.3334519073E-3)));
        p = V::fma(p, r, V::set1(T(4.1665795894E-2)));
        p = V::fma(p, r, V::set1(T(1.6666665459E-1)));
        p = V::fma(p, r, V::set1(T(5.0000001201E-1)));
        p = V::fma(p, r * r, r + V::set1(T(1)));
        return p * V::pow2i(n);
    }
}
template <class U = V>
static DEPTHLAB_VEC_INLINE U vtanh(U x) {
    if constexpr (W == 1) {
        return {std::tanh(x.v)};
    } else {
        const V one = V::set1(T(1));
        return one - V::set1(T(2)) / (vexp(x + x) + one);
    }
}
static DEPTHLAB_VEC_INLINE V vsigmoid(V x) {
    const V one = V::set1(T(1));
    return one / (one + vexp(V::zero() - x));
}

// Apply `f(i, rem)` over [0, n) in steps of W; `rem` < W only on the masked tail.
template <class F>
static DEPTHLAB_VEC_INLINE void for_each_vec(index_t n, F&& f) {
    index_t i = 0;
    for (; i + W <= n; i += W) f(i, W);
    if (i < n) f(i, static_cast<int>(n - i));
}

// ---- elementwise ----
// y = a + b
static void add(index_t n, const T* a, const T* b, T* y) {
    for_each_vec(n, [&](index_t i, int m) { (V::load(a + i, m) + V::load(b + i, m)).store(y + i, m); });
}
// y = a * b
static void mul(index_t n, const T* a, const T* b, T* y) {
    for_each_vec(n, [&](index_t i, int m) { (V::load(a + i, m) * V::load(b + i, m)).store(y + i, m); });
}
// y += a * b
static void mul_acc(index_t n, const T* a, const T* b, T* y) {
    for_each_vec(n, [&](index_t i, int m) { V::fma(V::load(a + i, m), V::load(b + i, m), V::load(y + i, m)).store(y + i, m); });
}
// y = alpha * x + beta * y   (beta == 0 never reads y, so y may be uninitialised)
static void axpby(index_t n, T alpha, const T* x, T beta, T* y) {
    const V va = V::set1(alpha), vb = V::set1(beta);
    if (beta == T(0)) {
        for_each_vec(n, [&](index_t i, int m) { (va * V::load(x + i, m)).store(y + i, m); });
    } else {
        for_each_vec(n, [&](index_t i, int m) { V::fma(va, V::load(x + i, m), vb * V::load(y + i, m)).store(y + i, m); });
    }
}
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
static void gelu_fwd(index_t n, const T* x, T* y) {
    const V k0 = V::set1(T(0.7978845608028654)), k1 = V::set1(T(0.044715)), half = V::set1(T(0.5));
    for_each_vec(n, [&](index_t i, int m) {
        const V v = V::load(x + i, m);
        const V t = vtanh(k0 * V::fma(k1 * v, v * v, v));
        (half * v * (V::set1(T(1)) + t)).store(y + i, m);
    });
}
// dx += dy * gelu'(x)
static void gelu_bwd(index_t n, const T* x, const T* dy, T* dx) {
    const V k0 = V::set1(T(0.7978845608028654)), k1 = V::set1(T(0.044715)), half = V::set1(T(0.5)), one = V::set1(T(1));
    for_each_vec(n, [&](index_t i, int m) {
        const V v = V::load(x + i, m);
        const V v2 = v * v;
        const V t = vtanh(k0 * V::fma(k1 * v, v2, v));
        const V du = k0 * V::fma(V::set1(T(3)) * k1, v2, one);
        const V g = half * (one + t) + half * v * (one - t * t) * du;
        V::fma(V::load(dy + i, m), g, V::load(dx + i, m)).store(dx + i, m);
    });
}
static void relu_fwd(index_t n, const T* x, T* y) {
    for_each_vec(n, [&](index_t i, int m) { V::max(V::load(x + i, m), V::zero()).store(y + i, m); });
}
// dx += (x > 0) * dy
static void relu_bwd(index_t n, const T* x, const T* dy, T* dx) {
    for_each_vec(n, [&](index_t i, int m) {
        const V g = V::gt_select(V::load(x + i, m), V::zero(), V::load(dy + i, m), V::zero());
        (V::load(dx + i, m) + g).store(dx + i, m);
    });
}
static void tanh_fwd(index_t n, const T* x, T* y) {
    for_each_vec(n, [&](index_t i, int m) { vtanh(V::load(x + i, m)).store(y + i, m); });
}
// dx += dy * (1 - y^2), from the output y
static void tanh_bwd(index_t n, const T* y, const T* dy, T* dx) {
    for_each_vec(n, [&](index_t i, int m) {
        const V v = V::load(y + i, m);
        V::fma(V::load(dy + i, m), V::set1(T(1)) - v * v, V::load(dx + i, m)).store(dx + i, m);
    });
}
static void sigmoid_fwd(index_t n, const T* x, T* y) {
    for_each_vec(n, [&](index_t i, int m) { vsigmoid(V::load(x + i, m)).store(y + i, m); });
}
// dx += dy * y (1 - y), from the output y
static void sigmoid_bwd(index_t n, const T* y, const T* dy, T* dx) {
    for_each_vec(n, [&](index_t i, int m) {
        const V v = V::load(y + i, m);
        V::fma(V::load(dy + i, m), v * (V::set1(T(1)) - v), V::load(dx + i, m)).store(dx + i, m);
    });
}

// ---- reductions ----
static T sum(index_t n, const T* x) {
    V acc = V::zero();
    for_each_vec(n, [&](index_t i, int m) { acc = acc + V::load(x + i, m); });
    return acc.reduce_add();
}
// y = a + w (b - a)
static void lerp(index_t n, const T* a, const T* b, T w, T* y) {
    const V vw = V::set1(w);
    for_each_vec(n, [&](index_t i, int m) {
        const V va = V::load(a + i, m);
        V::fma(vw, V::load(b + i, m) - va, va).store(y + i, m);
    });
}
// <x, b - a>, the difference taken first (b and a close: no cancellation of two large dots)
static T dot_diff(index_t n, const T* x, const T* b, const T* a) {
    V acc = V::zero();
    for_each_vec(n, [&](index_t i, int m) { acc = V::fma(V::load(x + i, m), V::load(b + i, m) - V::load(a + i, m), acc); });
    return acc.reduce_add();
}
static T dot(index_t n, const T* a, const T* b) {
    V acc = V::zero();
    for_each_vec(n, [&](index_t i, int m) { acc = V::fma(V::load(a + i, m), V::load(b + i, m), acc); });
    return acc.reduce_add();
}
static T max(index_t n, const T* x) {
    V acc = V::set1(-std::numeric_limits<T>::infinity());
    index_t i = 0;
    for (; i + W <= n; i += W) acc = V::max(acc, V::load(x + i));
    T r = acc.reduce_max();
    for (; i < n; ++i) r = std::max(r, x[i]);
    return r;
}

// ---- rows ----
// y = softmax(scale * x + mask) over one row; mask may be null (additive, -inf allowed).
// A row whose entries are all -inf yields zeros (a fully masked query attends to nothing).
static void softmax_row(index_t n, const T* x, T scale, const T* mask, T* y) {
    const V vs = V::set1(scale);
    for_each_vec(n, [&](index_t i, int m) {
        V z = vs * V::load(x + i, m);
        if (mask) z = z + V::load(mask + i, m);
        z.store(y + i, m);
    });
    const T mx = max(n, y);
    if (mx == -std::numeric_limits<T>::infinity()) {
        std::fill(y, y + n, T(0));
        return;
    }
    const V vm = V::set1(mx);
    V acc = V::zero();
    for_each_vec(n, [&](index_t i, int m) {
        vexp(V::load(y + i, m) - vm).store(y + i, m);
        acc = acc + V::load(y + i, m);  // reload: the masked tail lanes read as 0, not exp(-mx)
    });
    const V inv = V::set1(T(1) / acc.reduce_add());
    for_each_vec(n, [&](index_t i, int m) { (V::load(y + i, m) * inv).store(y + i, m); });
}
// dx (+)= scale * y * (dy - <y, dy>); without accumulate dx may alias dy.
static void softmax_bwd_row(index_t n, const T* y, const T* dy, T scale, T* dx, bool accumulate) {
    const V d = V::set1(dot(n, y, dy));
    const V vs = V::set1(scale);
    for_each_vec(n, [&](index_t i, int m) {
        const V v = V::load(y + i, m);
        const V base = accumulate ? V::load(dx + i, m) : V::zero();
        V::fma(vs * v, V::load(dy + i, m) - d, base).store(dx + i, m);
    });
}
// y = x - logsumexp(x); returns logsumexp(x)
static T log_softmax_row(index_t n, const T* x, T* y) {
    const T mx = max(n, x);
    const V vm = V::set1(mx);
    V acc = V::zero();
    index_t i = 0;
    for (; i + W <= n; i += W) acc = acc + vexp(V::load(x + i) - vm);
    T s = acc.reduce_add();
    for (; i < n; ++i) s += std::exp(x[i] - mx);
    const T lse = mx + std::log(s);
    const V vl = V::set1(lse);
    if (y) for_each_vec(n, [&](index_t j, int m) { (V::load(x + j, m) - vl).store(y + j, m); });
    return lse;
}
// dx += dy - exp(y) * sum(dy), from the output y
static void log_softmax_bwd_row(index_t n, const T* y, const T* dy, T* dx) {
    const V s = V::set1(sum(n, dy));
    for_each_vec(n, [&](index_t i, int m) {
        const V g = V::load(dy + i, m) - vexp(V::load(y + i, m)) * s;
        (V::load(dx + i, m) + g).store(dx + i, m);
    });
}
// dx += g * (exp(x - lse) - uniform): one row of the cross-entropy gradient w.r.t. logits,
// softmax(x) recomputed from the stored logsumexp (the one-hot part is the caller's)
static void cross_entropy_grad_row(index_t n, const T* x, T lse, T g, T uniform, T* dx) {
    const V vl = V::set1(lse), vg = V::set1(g), vu = V::set1(uniform);
    for_each_vec(n, [&](index_t i, int m) {
        V::fma(vg, vexp(V::load(x + i, m) - vl) - vu, V::load(dx + i, m)).store(dx + i, m);
    });
}
// y = (x - mean) * rstd * gamma + beta; stores mean and rstd for the backward pass.
static void layernorm_row(index_t n, const T* x, const T* gamma, const T* beta, T eps, T* y, T* mean_out, T* rstd_out) {
    const T mean = sum(n, x) / static_cast<T>(n);
    const V vm = V::set1(mean);
    V acc = V::zero();
    index_t j = 0;
    for (; j + W <= n; j += W) {
        const V d = V::load(x + j) - vm;
        acc = V::fma(d, d, acc);
    }
    T var_sum = acc.reduce_add();
    for (; j < n; ++j) var_sum += (x[j] - mean) * (x[j] - mean);
    const T rstd = T(1) / std::sqrt(std::max(var_sum / static_cast<T>(n), T(0)) + eps);
    const V vr = V::set1(rstd);
    for_each_vec(n, [&](index_t i, int m) {
        const V xh = (V::load(x + i, m) - vm) * vr;
        V::fma(xh, V::load(gamma + i, m), V::load(beta + i, m)).store(y + i, m);
    });
    *mean_out = mean;
    *rstd_out = rstd;
}
// dx += rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = gamma * dy: the row's two means
// (layernorm_bwd_means), then any column range of it (layernorm_bwd_apply)
struct layernorm_bwd_row_means {
    T g, gx;  // mean(g), mean(g * xhat)
};
static layernorm_bwd_row_means layernorm_bwd_means(index_t n, const T* x, const T* dy, const T* gamma, T mean, T rstd) {
    const V vm = V::set1(mean), vr = V::set1(rstd);
    V sg = V::zero(), sgx = V::zero();
    for_each_vec(n, [&](index_t i, int m) {
        const V xh = (V::load(x + i, m) - vm) * vr;
        const V g = V::load(dy + i, m) * V::load(gamma + i, m);
        sg = sg + g;
        sgx = V::fma(g, xh, sgx);
    });
    return {sg.reduce_add() / static_cast<T>(n), sgx.reduce_add() / static_cast<T>(n)};
}
static void layernorm_bwd_apply(index_t n, const T* x, const T* dy, const T* gamma, T mean, T rstd, layernorm_bwd_row_means means, T* dx) {
    const V vm = V::set1(mean), vr = V::set1(rstd), mg = V::set1(means.g), mgx = V::set1(means.gx);
    for_each_vec(n, [&](index_t i, int m) {
        const V xh = (V::load(x + i, m) - vm) * vr;
        const V g = V::load(dy + i, m) * V::load(gamma + i, m);
        V::fma(vr, g - mg - xh * mgx, V::load(dx + i, m)).store(dx + i, m);
    });
}
static void layernorm_bwd_row(index_t n, const T* x, const T* dy, const T* gamma, T mean, T rstd, T* dx) {
    layernorm_bwd_apply(n, x, dy, gamma, mean, rstd, layernorm_bwd_means(n, x, dy, gamma, mean, rstd), dx);
}
// Parameter gradients of one row segment: dgamma += dy * xhat, dbeta += dy.
// The caller splits columns between threads, so no two threads touch the same entry.
static void layernorm_param_grad_row(index_t n, const T* x, const T* dy, T mean, T rstd, T* dgamma, T* dbeta) {
    const V vm = V::set1(mean), vr = V::set1(rstd);
    for_each_vec(n, [&](index_t i, int m) {
        const V d = V::load(dy + i, m);
        V::fma(d, (V::load(x + i, m) - vm) * vr, V::load(dgamma + i, m)).store(dgamma + i, m);
        (V::load(dbeta + i, m) + d).store(dbeta + i, m);
    });
}

// ---- inverted dropout's mask from the Philox stream (core/rng.hpp) ----
// Philox4x32-10 on `lanes` consecutive blocks at once, one array per counter word, so that the
// compiler turns every round into vector multiplies for this ISA: words[4 b + j] is word j of
// block block0 + b, the bits of detail::philox_block (tested against it).
static constexpr int philox_lanes = 16;
static DEPTHLAB_VEC_INLINE void philox_blocks(std::uint64_t seed, std::uint64_t block0, std::uint32_t* words) {
    constexpr int L = philox_lanes;
    constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u, w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
    alignas(64) std::uint32_t c0[L], c1[L], c2[L], c3[L];
    for (int b = 0; b < L; ++b) {
        const std::uint64_t block = block0 + static_cast<std::uint64_t>(b);
        c0[b] = static_cast<std::uint32_t>(block);
        c1[b] = static_cast<std::uint32_t>(block >> 32);
        c2[b] = c3[b] = 0u;
    }
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
#pragma omp simd
        for (int b = 0; b < L; ++b) {
            const std::uint64_t p0 = std::uint64_t{m0} * c0[b];
            const std::uint64_t p1 = std::uint64_t{m1} * c2[b];
            const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1[b] ^ k0;
            const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3[b] ^ k1;
            c1[b] = static_cast<std::uint32_t>(p1);
            c3[b] = static_cast<std::uint32_t>(p0);
            c0[b] = n0;
            c2[b] = n2;
        }
        k0 += w0;
        k1 += w1;
    }
    for (int b = 0; b < L; ++b) {
        words[4 * b] = c0[b];
        words[4 * b + 1] = c1[b];
        words[4 * b + 2] = c2[b];
        words[4 * b + 3] = c3[b];
    }
}
// mask[j] = detail::dropout_keep(word(word0 + j)) for j < m, word(i) the i-th word of the
// stream of `seed`: keep (1 / (1 − p)) where the word is at or above threshold = p·2^32, else 0
static void dropout_keep_mask(index_t m, std::uint64_t seed, std::uint64_t word0, std::uint64_t threshold, T keep, T* mask) {
    index_t j = 0;
    const auto one_block = [&](std::uint64_t block, index_t from, index_t to) {  // the words [from, to) of one block
        std::uint32_t w[4];
        depthlab::detail::philox_block(seed, block, w);
        for (index_t t = from; t < to; ++t, ++j) mask[j] = depthlab::detail::dropout_keep(w[t], threshold, keep);
    };
    if (const auto lane = static_cast<index_t>(word0 % 4); lane != 0 && m > 0) one_block(word0 / 4, lane, std::min<index_t>(4, lane + m));
    constexpr index_t span = 4 * philox_lanes;
    alignas(64) std::uint32_t words[span];
    for (; j + span <= m; j += span) {
        philox_blocks(seed, (word0 + static_cast<std::uint64_t>(j)) / 4, words);
#pragma omp simd
        for (index_t t = 0; t < span; ++t) mask[j + t] = std::uint64_t{words[t]} >= threshold ? keep : T(0);
    }
    while (j < m) one_block((word0 + static_cast<std::uint64_t>(j)) / 4, 0, std::min<index_t>(4, m - j));
}
