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
    // Sizes: Bn sequences, Tq queries and Tk keys each, `heads` heads of head_dim columns;
    // q_width, k_width, v_width are the row widths of the tensors q, k and v are sliced from.
    const index_t Bn = sq[0], Tq = sq[1], Tk = sk[1], heads = opt.heads, head_dim = dim / heads;
    const index_t q_width = sq[2], k_width = sk[2], v_width = sv[2];
    const T alpha = static_cast<T>(opt.scale > 0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(head_dim)));
    const Shape score_shape{Bn, heads, Tq, Tk};
    Tensor<T, B> mask_values;
    const row_broadcast map = detail::mask_rows("attention", score_shape, mask, mask_values);

    const auto q_values = q.src.value().contiguous(), k_values = k.src.value().contiguous(),
               v_values = v.src.value().contiguous();
    const T* qp = q_values.data() + q.offset;
    const T* kp = k_values.data() + k.offset;
    const T* vp = v_values.data() + v.offset;
    const index_t score_size = Tq * Tk;  // one head's score matrix

    // The four products below share one batching: inner batch = heads (a head's columns are
    // head_dim apart in q, k, v and the output; its score matrix score_size apart), outer
    // batch = sequences.
    // scores (Bn, heads, Tq, Tk) = alpha q k^T; then softmax with the mask, in place
    auto probs = Tensor<T, B>::empty(score_shape);
    // optional dropout on the probabilities (the mask drawn where it is applied, forward and
    // backward, from the same counter words: never stored)
    const bool dropping = opt.dropout > 0;
    Tensor<T, B> probs_kept = dropping ? Tensor<T, B>::empty(score_shape) : probs;
    const T drop_p = static_cast<T>(opt.dropout);
    const Generator drop_words = dropping ? *gen : Generator();
    const std::uint64_t drop_first = dropping ? gen->reserve(static_cast<std::uint64_t>(probs.numel())) : 0;
    auto out = Tensor<T, B>::empty({Bn, Tq, dim});
    // scores (Bn, heads, Tq, Tk) = alpha q k^T; then softmax with the mask, in place
    gemm_args scores{.trans_b = true, .m = Tq, .n = Tk, .k = head_dim, .lda = q_width, .ldb = k_width, .ldc = Tk,
                     .batch = heads, .stride_a = head_dim, .stride_b = head_dim, .stride_c = score_size,
                     .batch2 = Bn, .stride_a2 = Tq * q_width, .stride_b2 = Tk * k_width, .stride_c2 = heads * score_size};
    // out[b, :, h*head_dim:(h+1)*head_dim] (Bn, Tq, dim) = probs_kept[b, h] v[b, :, h]
    gemm_args mix{.m = Tq, .n = head_dim, .k = Tk, .lda = Tk, .ldb = v_width, .ldc = dim,
                  .batch = heads, .stride_a = score_size, .stride_b = head_dim, .stride_c = head_dim,
                  .batch2 = Bn, .stride_a2 = heads * score_size, .stride_b2 = Tk * v_width, .stride_c2 = Tq * dim};
    // Under bf16 precision q, k, v and the kept probabilities are converted once, here: the
    // backward products read them in the same layouts (dK reads q, dQ reads k, dP reads v, dV
    // reads the probabilities)
    const bf16_operand qb = detail::bf16_copy_for<T, B>(scores, layout_a(scores), qp);
    const bf16_operand kb = detail::bf16_copy_for<T, B>(scores, layout_b(scores), kp);
    const bf16_operand vb = detail::bf16_copy_for<T, B>(mix, layout_b(mix), vp);
    scores.a_bf16 = &qb;
    scores.b_bf16 = &kb;
    mix.b_bf16 = &vb;
    // both products' address tables (a device's (sequence, head) batches) in one launch
    gemm_addresses forward_tables[2];
    const gemm_table_request<T> forward_products[2] = {{scores, qp, kp, probs.data()}, {mix, probs_kept.data(), vp, out.data()}};
    P::gemm_address_tables(2, forward_products, forward_tables);
    scores.addresses = &forward_tables[0];
    mix.addresses = &forward_tables[1];
    P::gemm(scores, alpha, qp, kp, T(0), probs.data());
    P::softmax_fwd(Bn * heads * Tq, Tk, probs.data(), T(1), mask_values.defined() ? mask_values.data() : nullptr, map,
                   probs.data());
    if (dropping) P::dropout_apply(probs.numel(), drop_p, drop_words, drop_first, probs.data(), probs_kept.data());
    const bf16_operand pb = detail::bf16_copy_for<T, B>(mix, layout_a(mix), probs_kept.data());
    mix.a_bf16 = &pb;
    P::gemm(mix, T(1), probs_kept.data(), vp, T(0), out.data());

    const index_t qo = q.offset, ko = k.offset, vo = v.offset;
    return detail::make_result<T, B>(op_kind::attention, std::move(out), {q.src, k.src, v.src}, [=](Node<T, B>& nd) {
        const T* d_out = nd.grad.data();  // (Bn, Tq, dim)
        auto d_probs = Tensor<T, B>::empty(score_shape);
        T* const dv = detail::parent_grad(nd, 2);
        T* const dq = detail::parent_grad(nd, 0);
        T* const dk = detail::parent_grad(nd, 1);
        // d_probs_kept = d_out v^T
        gemm_args d_mix{.trans_b = true, .m = Tq, .n = Tk, .k = head_dim, .lda = dim, .ldb = v_width, .ldc = Tk,
                        .batch = heads, .stride_a = head_dim, .stride_b = head_dim, .stride_c = score_size,
                        .batch2 = Bn, .stride_a2 = Tq * dim, .stride_b2 = Tk * v_width, .stride_c2 = heads * score_size,
                        .b_bf16 = &vb};
        // dv += probs_kept^T d_out
        gemm_args d_v{.trans_a = true, .m = Tk, .n = head_dim, .k = Tq, .lda = Tk, .ldb = dim, .ldc = v_width,
                      .batch = heads, .stride_a = score_size, .stride_b = head_dim, .stride_c = head_dim,
                      .batch2 = Bn, .stride_a2 = heads * score_size, .stride_b2 = Tq * dim, .stride_c2 = Tk * v_width,
                      .a_bf16 = &pb};
        // dq += alpha d_scores k ; dk += alpha d_scores^T q
        gemm_args d_q{.m = Tq, .n = head_dim, .k = Tk, .lda = Tk, .ldb = k_width, .ldc = q_width,
                      .batch = heads, .stride_a = score_size, .stride_b = head_dim, .stride_c = head_dim,
                      .batch2 = Bn, .stride_a2 = heads * score_size, .stride_b2 = Tk * k_width, .stride_c2 = Tq * q_width,
                      .b_bf16 = &kb};
        gemm_args d_k{.trans_a = true, .m = Tk, .n = head_dim, .k = Tq, .lda = Tk, .ldb = q_width, .ldc = k_width,
                      .batch = heads, .stride_a = score_size, .stride_b = head_dim, .stride_c = head_dim,
                      .batch2 = Bn, .stride_a2 = heads * score_size, .stride_b2 = Tq * q_width, .stride_c2 = Tk * k_width,
                      .b_bf16 = &qb};
        const bf16_operand d_out_b = dv ? detail::bf16_copy_for<T, B>(d_mix, layout_a(d_mix), d_out) : bf16_operand{};  // (read twice)
        d_mix.a_bf16 = &d_out_b;
        d_v.b_bf16 = &d_out_b;
        // the four products' address tables in one launch (under bf16 the score gradient's copy
        // is made later, so dq's and dk's products build their own)
        std::vector<gemm_table_request<T>> products{{d_mix, d_out, vp, d_probs.data()}};
        std::vector<gemm_args*> users{&d_mix};
        if (dv) {
            products.push_back({d_v, probs_kept.data(), d_out, dv + vo});
            users.push_back(&d_v);
        }
        if (dq) {
            products.push_back({d_q, d_probs.data(), kp, dq + qo});
            users.push_back(&d_q);
        }
        if (dk) {
            products.push_back({d_k, d_probs.data(), qp, dk + ko});
            users.push_back(&d_k);
        }
        std::vector<gemm_addresses> tables(products.size());
        P::gemm_address_tables(static_cast<index_t>(products.size()), products.data(), tables.data());
        for (std::size_t i = 0; i < users.size(); ++i) users[i]->addresses = &tables[i];
        P::gemm(d_mix, T(1), d_out, vp, T(0), d_probs.data());
        if (dv) P::gemm(d_v, T(1), probs_kept.data(), d_out, T(1), dv + vo);
        if (dropping) P::dropout_apply(d_probs.numel(), drop_p, drop_words, drop_first, d_probs.data(), d_probs.data());
        // d_scores = probs * (d_probs - <probs, d_probs>), in place
        P::softmax_bwd(Bn * heads * Tq, Tk, probs.data(), d_probs.data(), T(1), d_probs.data(), /*accumulate=*/false);
        const bf16_operand d_scores_b = dq && dk ? detail::bf16_copy_for<T, B>(d_q, layout_a(d_q), d_probs.data()) : bf16_operand{};
        d_q.a_bf16 = d_k.a_bf16 = &d_scores_b;
        if (dq) P::gemm(d_q, alpha, d_probs.data(), kp, T(1), dq + qo);
        if (dk) P::gemm(d_k, alpha, d_probs.data(), qp, T(1), dk + ko);
    });
}

/// Attention of a ragged set of queries over per-sequence keys: the running tokens of an
/// adaptive-depth encoder attend to every (running or halted) token of their sequence.
/// q.src: (Nq, Wq), the queries of sequence b being rows [q_offsets[b], q_offsets[b+1]);
/// k.src, v.src: (B * T_, W) (or (B, T_, W)), row b*T_ + t; only keys t < key_lengths[b]
/// exist. Result: (Nq, dim).
///
/// Implementation: the queries are scattered into a (B, block_rows, Wq) block, block_rows = the largest query
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
    index_t block_rows = 0;
    for (index_t b = 0; b < Bn; ++b) {
        const index_t nb = q_offsets[b + 1] - q_offsets[b];
        DEPTHLAB_CHECK(nb >= 0 && key_lengths[b] >= 0 && key_lengths[b] <= T_, shape_error, "ragged_attention: sequence ", b, " has ",
                       nb, " queries and ", key_lengths[b], " keys (of at most ", T_, ")");
        block_rows = std::max(block_rows, nb);
    }
    const Var<T, B> k3 = reshape(k.src, {Bn, T_, sk.back()});
    const Var<T, B> v3 = k.src.node_ptr() == v.src.node_ptr() ? k3 : reshape(v.src, {Bn, T_, sv.back()});
    const bool all_keys = std::all_of(key_lengths.begin(), key_lengths.end(), [&](index_t l) { return l == T_; });
    const Tensor<T, B> key_mask = all_keys ? Tensor<T, B>{} : key_padding_mask<T, B>(key_lengths, T_);
    const auto attend = [&](const Var<T, B>& q_block) {  // (Bn, block_rows, Wq) -> (Bn * block_rows, dim)
        const index_t block_rows_now = q_block.shape()[1];
        return reshape(attention<T, B>({q_block, q.offset}, {k3, k.offset}, {v3, v.offset}, dim, {.heads = heads}, key_mask),
                       {Bn * block_rows_now, dim});
    };
    Var<T, B> rows;
    if (block_rows > 0 && sq[0] == Bn * block_rows) {
        // every sequence has block_rows queries (all tokens still running, as in an adaptive encoder's
        // first iterations): the rows already are the (B, block_rows) block, so nothing moves
        rows = attend(reshape(q.src, {Bn, block_rows, sq[1]}));
    } else {
        block_rows = std::max<index_t>(1, (block_rows + 7) / 8 * 8);
        std::vector<std::int64_t> slot(static_cast<std::size_t>(sq[0]));  // query row -> row of the (B, block_rows) block
        for (index_t b = 0; b < Bn; ++b)
            for (index_t i = q_offsets[b]; i < q_offsets[b + 1]; ++i) slot[i] = b * block_rows + (i - q_offsets[b]);
        const auto slots = detail::upload_ids<B>(slot);  // one upload for the scatter and the gather
        rows = gather_rows(attend(reshape(scatter_rows(q.src, slots, Bn * block_rows), {Bn, block_rows, sq[1]})), slots);
    }
    rows.node().op = op_kind::ragged_attention;
    return rows;
}

}  // namespace depthlab
