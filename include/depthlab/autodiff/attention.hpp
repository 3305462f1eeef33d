#pragma once
// Fused multi-head scaled dot-product attention as one coarse op.
//
// Heads are read straight out of the projections' (B, T, width) layout through strided
// batched GEMMs (outer batch = sequences, inner batch = heads), and the output is written
// in (B, Tq, H*dh) layout: no head split/merge copies, no transposes. q, k and v may be
// column ranges of one packed projection (self-attention: [q | k | v] = x W_qkv^T).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "depthlab/autodiff/ops.hpp"

namespace depthlab {

namespace detail {
/// The values of key_padding_mask, row-major (B, T), built on the host.
template <class T>
std::vector<T> key_padding_values(const std::vector<index_t>& lengths, index_t T_) {
    std::vector<T> m(lengths.size() * static_cast<std::size_t>(T_), T(0));
    for (std::size_t b = 0; b < lengths.size(); ++b) {
        DEPTHLAB_CHECK(lengths[b] >= 0 && lengths[b] <= T_, index_error, "padding mask: length ", lengths[b], " of sequence ", b,
                       " outside [0, ", T_, "]");
        for (index_t t = lengths[b]; t < T_; ++t) m[b * T_ + t] = -std::numeric_limits<T>::infinity();
    }
    return m;
}
}  // namespace detail

/// (B, 1, 1, T) additive key mask: keys t >= lengths[b] get -inf.
template <class T, class B>
Tensor<T, B> key_padding_mask(const std::vector<index_t>& lengths, index_t T_) {
    return Tensor<T, B>::from({static_cast<index_t>(lengths.size()), 1, 1, T_}, detail::key_padding_values<T>(lengths, T_));
}

/// Columns [offset, offset + dim) of a (B, T, width) activation: one of q, k or v.
template <class T, class B>
struct projection_slice {
    Var<T, B> src;
    index_t offset = 0;
};

struct attention_options {
    int heads = 1;
    double scale = 0;        // 0: 1/sqrt(head_dim)
    double dropout = 0;      // on the attention probabilities (training only)
};

/// out (B, Tq, dim) = concat_h softmax(scale * q_h k_h^T + mask) v_h.
/// q: (B, Tq, *), k and v: (B, Tk, *), each a column slice of width `dim`; mask: additive,
/// broadcastable to (B, H, Tq, Tk) (e.g. padding (B,1,1,Tk), causal (Tq,Tk)); gen is used
/// only when dropout > 0 (training).
template <class T, class B>
Var<T, B> attention(const projection_slice<T, B>& q, const projection_slice<T, B>& k, const projection_slice<T, B>& v, index_t dim,
                    const attention_options& opt, const Tensor<T, B>& mask = {}, Generator* gen = nullptr) {
    using P = primitives<B>;
    const Shape& sq = q.src.shape();
    const Shape& sk = k.src.shape();
    const Shape& sv = v.src.shape();
    DEPTHLAB_CHECK(sq.rank() == 3 && sk.rank() == 3 && sv.rank() == 3 && sq[0] == sk[0] && sk[0] == sv[0] && sk[1] == sv[1],
                   shape_error, "attention: q source ", sq, ", k source ", sk, ", v source ", sv,
                   " (expected (B, Tq, *), (B, Tk, *), (B, Tk, *))");
    DEPTHLAB_CHECK(opt.heads >= 1 && dim % opt.heads == 0, shape_error, "attention: dim ", dim, " is not divisible by ", opt.heads,
                   " heads");
    DEPTHLAB_CHECK(q.offset >= 0 && q.offset + dim <= sq[2] && k.offset >= 0 && k.offset + dim <= sk[2] && v.offset >= 0 &&
                       v.offset + dim <= sv[2],
                   shape_error, "attention: column slices [", q.offset, ", +", dim, "), [", k.offset, ", +", dim, "), [", v.offset,
                   ", +", dim, ") exceed sources ", sq, ", ", sk, ", ", sv);
    DEPTHLAB_CHECK(opt.dropout >= 0 && opt.dropout < 1 && (opt.dropout == 0 || gen != nullptr), usage_error,
                   "attention: dropout ", opt.dropout, " needs 0 <= p < 1 and a generator");
    const index_t Bn = sq[0], Tq = sq[1], Tk = sk[1], H = opt.heads, dh = dim / H;
    const index_t Wq = sq[2], Wk = sk[2], Wv = sv[2];
    const T alpha = static_cast<T>(opt.scale > 0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(dh)));
    const Shape score_shape{Bn, H, Tq, Tk};
    Tensor<T, B> M;
    const row_broadcast map = detail::mask_rows("attention", score_shape, mask, M);

    const auto Q = q.src.value().contiguous(), K = k.src.value().contiguous(), Vv = v.src.value().contiguous();
    const T* qp = Q.data() + q.offset;
    const T* kp = K.data() + k.offset;
    const T* vp = Vv.data() + v.offset;
    const index_t S = Tq * Tk;  // one head's score matrix

    // scores = alpha q k^T, per (sequence, head); then softmax with the mask, in place
    auto Pm = Tensor<T, B>::empty(score_shape);
    P::gemm(gemm_args{false, true, Tq, Tk, dh, Wq, Wk, Tk, H, dh, dh, S, Bn, Tq * Wq, Tk * Wk, H * S}, alpha, qp, kp, T(0), Pm.data());
    P::softmax_fwd(Bn * H * Tq, Tk, Pm.data(), T(1), M.defined() ? M.data() : nullptr, map, Pm.data());
    // optional dropout on the probabilities
    Tensor<T, B> drop, Pd = Pm;
    if (opt.dropout > 0) {
        drop = Tensor<T, B>::empty(score_shape);
        P::dropout_mask(drop.numel(), static_cast<T>(opt.dropout), *gen, gen->reserve(static_cast<std::uint64_t>(drop.numel())),
                        drop.data());
        Pd = Tensor<T, B>::empty(score_shape);
        P::mul(Pd.numel(), Pm.data(), drop.data(), Pd.data());
    }
    // out[b, :, h*dh:(h+1)*dh] = P[b, h] v[b, :, h]
    auto O = Tensor<T, B>::empty({Bn, Tq, dim});
    P::gemm(gemm_args{false, false, Tq, dh, Tk, Tk, Wv, dim, H, S, dh, dh, Bn, H * S, Tk * Wv, Tq * dim}, T(1), Pd.data(), vp, T(0),
            O.data());

    const index_t qo = q.offset, ko = k.offset, vo = v.offset;
    return detail::make_result<T, B>(op_kind::attention, std::move(O), {q.src, k.src, v.src}, [=](Node<T, B>& nd) {
        const T* dO = nd.grad.data();
        auto dP = Tensor<T, B>::empty(score_shape);
        // dPd = dO v^T
        P::gemm(gemm_args{false, true, Tq, Tk, dh, dim, Wv, Tk, H, dh, dh, S, Bn, Tq * dim, Tk * Wv, H * S}, T(1), dO, vp, T(0),
                dP.data());
        // dv += Pd^T dO
        if (T* dV = detail::parent_grad(nd, 2))
            P::gemm(gemm_args{true, false, Tk, dh, Tq, Tk, dim, Wv, H, S, dh, dh, Bn, H * S, Tq * dim, Tk * Wv}, T(1), Pd.data(), dO, T(1),
                    dV + vo);
        if (drop.defined()) P::mul(dP.numel(), dP.data(), drop.data(), dP.data());
        // dS = P * (dP - <P, dP>), in place
        P::softmax_bwd(Bn * H * Tq, Tk, Pm.data(), dP.data(), T(1), dP.data(), /*accumulate=*/false);
        // dq += alpha dS k ; dk += alpha dS^T q
        if (T* dQ = detail::parent_grad(nd, 0))
            P::gemm(gemm_args{false, false, Tq, dh, Tk, Tk, Wk, Wq, H, S, dh, dh, Bn, H * S, Tk * Wk, Tq * Wq}, alpha, dP.data(), kp, T(1),
                    dQ + qo);
        if (T* dK = detail::parent_grad(nd, 1))
            P::gemm(gemm_args{true, false, Tk, dh, Tq, Tk, Wq, Wk, H, S, dh, dh, Bn, H * S, Tq * Wq, Tk * Wk}, alpha, dP.data(), qp, T(1),
                    dK + ko);
    });
}

/// Attention of a ragged set of queries over per-sequence keys: the running tokens of an
/// adaptive-depth encoder attend to every (running or halted) token of their sequence.
/// q.src: (Nq, Wq), the queries of sequence b being rows [q_offsets[b], q_offsets[b+1]);
/// k.src, v.src: (B * T_, W) (or (B, T_, W)), row b*T_ + t; only keys t < key_lengths[b]
/// exist. Result: (Nq, dim).
///
/// Implementation: the queries are scattered into a (B, M, Wq) block, M = the largest query
/// count rounded up to a multiple of 8 (few distinct GEMM shapes, so oneDNN primitives are
/// reused), and the batched attention runs on it with a key padding mask; the result rows
/// are gathered back. Only this attention core pays for the padding — the projections and
/// the feed-forward around it run on the compact rows. When every sequence has the same
/// number of queries, the rows already are that block and neither copy is made.
template <class T, class B>
Var<T, B> ragged_attention(const projection_slice<T, B>& q, const std::vector<index_t>& q_offsets, const projection_slice<T, B>& k,
                           const projection_slice<T, B>& v, index_t T_, const std::vector<index_t>& key_lengths, index_t dim, int heads) {
    const index_t Bn = static_cast<index_t>(key_lengths.size());
    const Shape& sq = q.src.shape();
    const Shape& sk = k.src.shape();
    const Shape& sv = v.src.shape();
    DEPTHLAB_CHECK(sq.rank() == 2 && static_cast<index_t>(q_offsets.size()) == Bn + 1 && q_offsets.front() == 0 &&
                       q_offsets.back() == sq[0],
                   shape_error, "ragged_attention: queries ", sq, " with ", q_offsets.size(), " offsets for ", Bn, " sequences");
    DEPTHLAB_CHECK(sk.numel() / sk.back() == Bn * T_ && sv.numel() / sv.back() == Bn * T_, shape_error, "ragged_attention: keys ",
                   sk, " and values ", sv, " are not ", Bn, " sequences of ", T_, " rows");
    index_t M = 0;
    for (index_t b = 0; b < Bn; ++b) {
        const index_t nb = q_offsets[b + 1] - q_offsets[b];
        DEPTHLAB_CHECK(nb >= 0 && key_lengths[b] >= 0 && key_lengths[b] <= T_, shape_error, "ragged_attention: sequence ", b, " has ",
                       nb, " queries and ", key_lengths[b], " keys (of at most ", T_, ")");
        M = std::max(M, nb);
    }
    const Var<T, B> k3 = reshape(k.src, {Bn, T_, sk.back()});
    const Var<T, B> v3 = k.src.node_ptr() == v.src.node_ptr() ? k3 : reshape(v.src, {Bn, T_, sv.back()});
    const bool all_keys = std::all_of(key_lengths.begin(), key_lengths.end(), [&](index_t l) { return l == T_; });
    const Tensor<T, B> key_mask = all_keys ? Tensor<T, B>{} : key_padding_mask<T, B>(key_lengths, T_);
    const auto attend = [&](const Var<T, B>& q_block) {  // (Bn, M, Wq) -> (Bn * M, dim)
        const index_t m = q_block.shape()[1];
        return reshape(attention<T, B>({q_block, q.offset}, {k3, k.offset}, {v3, v.offset}, dim, {.heads = heads}, key_mask),
                       {Bn * m, dim});
    };
    Var<T, B> rows;
    if (M > 0 && sq[0] == Bn * M) {
        // every sequence has M queries (all tokens still running, as in an adaptive encoder's
        // first iterations): the rows already are the (B, M) block, so nothing moves
        rows = attend(reshape(q.src, {Bn, M, sq[1]}));
    } else {
        M = std::max<index_t>(1, (M + 7) / 8 * 8);
        std::vector<std::int64_t> slot(static_cast<std::size_t>(sq[0]));  // query row -> row of the (B, M) block
        for (index_t b = 0; b < Bn; ++b)
            for (index_t i = q_offsets[b]; i < q_offsets[b + 1]; ++i) slot[i] = b * M + (i - q_offsets[b]);
        const auto slots = detail::upload_ids<B>(slot);  // one upload for the scatter and the gather
        rows = gather_rows(attend(reshape(scatter_rows(q.src, slots, Bn * M), {Bn, M, sq[1]})), slots);
    }
    rows.node().op = op_kind::ragged_attention;
    return rows;
}

}  // namespace depthlab
