#pragma once
// Differentiable ops on rows and shapes: embedding, gather / scatter / update of rows,
// concat, split, slice, reshape, transpose.
// Part of autodiff/ops.hpp (whose header says what every op guarantees).
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "depthlab/autodiff/variable.hpp"
#include "depthlab/backend/backend.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/autodiff/ops/normalization.hpp"

namespace depthlab {

// ---------------------------------------------------------------- rows by index
/// out[i] = x[idx[i]] along axis 0.  x: (N, ...), idx: (n,) on the device, result: (n, ...).
template <class T, class B>
Var<T, B> gather_rows(const Var<T, B>& x, const Tensor<std::int64_t, B>& idx, op_kind op = op_kind::gather_rows) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    const char* name = op_name(op);
    DEPTHLAB_CHECK(sx.rank() >= 1, shape_error, name, ": input must have rank >= 1, got ", sx);
    detail::check_id_tensor(name, idx, sx[0], op == op_kind::embedding ? "id" : "index");
    const index_t n = idx.numel(), cols = sx.numel() / std::max<index_t>(sx[0], 1), limit = sx[0];
    Shape so = sx;
    so[0] = n;
    const Tensor<std::int64_t, B> ids = idx;
    const auto X = detail::contiguous_value(x);
    auto Y = Tensor<T, B>::empty(so);
    P::gather_rows(n, cols, X.data(), limit, ids.data(), Y.data());
    return detail::make_result<T, B>(op, std::move(Y), {x}, [=](Node<T, B>& nd) {
        // a first gradient is written whole (rows no id names get zeros) by the scatter itself
        if (const auto gX = detail::parent_grad_out(nd, 0); gX.data)
            P::scatter_add_rows(n, cols, nd.grad.data(), limit, ids.data(), gX.data, gX.beta != T(0));
    });
}
/// The same with host indices (checked here, then uploaded).
template <class T, class B>
Var<T, B> gather_rows(const Var<T, B>& x, std::span<const std::int64_t> idx, op_kind op = op_kind::gather_rows) {
    DEPTHLAB_CHECK(x.shape().rank() >= 1, shape_error, op_name(op), ": input must have rank >= 1, got ", x.shape());
    detail::check_ids(op_name(op), idx, x.shape()[0], op == op_kind::embedding ? "id" : "index");
    return gather_rows(x, detail::upload_ids<B>(idx), op);
}
/// out = zeros(rows, ...); out[idx[i]] += x[i].  x: (n, ...), idx: (n,), result: (rows, ...).
template <class T, class B>
Var<T, B> scatter_rows(const Var<T, B>& x, const Tensor<std::int64_t, B>& idx, index_t rows) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    DEPTHLAB_CHECK(sx.rank() >= 1 && idx.defined() && sx[0] == idx.numel(), shape_error, "scatter_rows: indices ", idx.shape(),
                   " for input ", sx);
    detail::check_id_tensor("scatter_rows", idx, rows, "index");
    const index_t n = sx[0], cols = sx.numel() / std::max<index_t>(n, 1);
    Shape so = sx;
    so[0] = rows;
    const Tensor<std::int64_t, B> ids = idx;
    const auto X = detail::contiguous_value(x);
    auto Y = Tensor<T, B>::empty(so);
    P::scatter_add_rows(n, cols, X.data(), rows, ids.data(), Y.data(), /*accumulate=*/false);
    return detail::make_result<T, B>(op_kind::scatter_rows, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (const auto gX = detail::parent_grad_out(nd, 0); gX.data)  // (every row of x is gathered: a first gradient is written)
            P::gather_rows(n, cols, nd.grad.data(), rows, ids.data(), gX.data, /*accumulate=*/gX.beta != T(0));
    });
}
template <class T, class B>
Var<T, B> scatter_rows(const Var<T, B>& x, std::span<const std::int64_t> idx, index_t rows) {
    DEPTHLAB_CHECK(x.shape().rank() >= 1 && x.shape()[0] == static_cast<index_t>(idx.size()), shape_error, "scatter_rows: ",
                   idx.size(), " indices for input ", x.shape());
    detail::check_ids("scatter_rows", idx, rows, "index");
    return scatter_rows(x, detail::upload_ids<B>(idx), rows);
}

namespace detail {
/// Throws unless the host indices are distinct (they are all in [0, n)).
inline void check_distinct(const char* op, std::span<const std::int64_t> idx, index_t n) {
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    for (std::size_t i = 0; i < idx.size(); ++i) {
        DEPTHLAB_CHECK(!seen[static_cast<std::size_t>(idx[i])], index_error, op, ": index ", idx[i], " repeated (position ", i, ")");
        seen[static_cast<std::size_t>(idx[i])] = 1;
    }
}
}  // namespace detail

/// y = copy of base with rows idx[i] replaced by rows[i] (idx without repeats).
/// base: (N, ...), idx: (n,) on the device, rows: (n, ...). Gradients: base gets dy outside
/// the replaced rows, rows get dy of their rows. (ACT: only the running tokens' states change.)
template <class T, class B>
Var<T, B> row_update(const Var<T, B>& base, const Tensor<std::int64_t, B>& idx, const Var<T, B>& rows) {
    using P = primitives<B>;
    const Shape& sb = base.shape();
    const Shape& sr = rows.shape();
    DEPTHLAB_CHECK(sb.rank() >= 1 && sr.rank() == sb.rank() && idx.defined() && sr[0] == idx.numel() &&
                       Shape(sb.begin() + 1, sb.end()) == Shape(sr.begin() + 1, sr.end()),
                   shape_error, "row_update: base ", sb, ", indices ", idx.shape(), ", rows ", sr);
    detail::check_id_tensor("row_update", idx, sb[0], "index");
    if constexpr (B::host_accessible)
        detail::check_distinct("row_update", std::span<const std::int64_t>(idx.data(), static_cast<std::size_t>(idx.numel())), sb[0]);
    const index_t n = sr[0], cols = sb.numel() / std::max<index_t>(sb[0], 1), limit = sb[0];
    const Tensor<std::int64_t, B> ids = idx;
    auto Y = base.value().contiguous().clone();
    const auto R = detail::contiguous_value(rows);
    P::scatter_rows_set(n, cols, R.data(), limit, ids.data(), Y.data());
    return detail::make_result<T, B>(op_kind::row_update, std::move(Y), {base, rows}, [=](Node<T, B>& nd) {
        const T* dY = nd.grad.data();
        if (const auto gR = detail::parent_grad_out(nd, 1); gR.data)
            P::gather_rows(n, cols, dY, limit, ids.data(), gR.data, /*accumulate=*/gR.beta != T(0));
        Node<T, B>& pb = *nd.parents[0];
        if (!pb.requires_grad) return;
        if (!pb.grad.defined() && !nd.retain_grad) {
            // the base's first gradient: take over this node's buffer (freed after this call
            // anyway) and clear the replaced rows, instead of zero-filling a new buffer and
            // adding to it — chains of updates (ACT's keys/values) then cost no full passes
            pb.grad = nd.grad;
            P::rows_axpy(n, cols, T(0), static_cast<const T*>(nullptr), limit, ids.data(), pb.grad.data());
            return;
        }
        T* dB = pb.grad_buffer().data();
        // every row passes through, then the replaced rows are taken back out (one pass, no copy)
        P::axpby(nd.grad.numel(), T(1), dY, T(1), dB);
        P::rows_axpy(n, cols, T(-1), dY, limit, ids.data(), dB);
    });
}
template <class T, class B>
Var<T, B> row_update(const Var<T, B>& base, std::span<const std::int64_t> idx, const Var<T, B>& rows) {
    const Shape& sb = base.shape();
    DEPTHLAB_CHECK(sb.rank() >= 1 && rows.shape().rank() == sb.rank() && rows.shape()[0] == static_cast<index_t>(idx.size()),
                   shape_error, "row_update: base ", sb, ", ", idx.size(), " indices, rows ", rows.shape());
    detail::check_ids("row_update", idx, sb[0], "index");
    detail::check_distinct("row_update", idx, sb[0]);
    return row_update(base, detail::upload_ids<B>(idx), rows);
}
/// y[r] = w[r] * x[r] for x: (N, C), w: (N) — a per-row weight.
template <class T, class B>
Var<T, B> scale_rows(const Var<T, B>& x, const Var<T, B>& w) {
    using P = primitives<B>;
    const Shape& sx = x.shape();
    DEPTHLAB_CHECK(sx.rank() == 2 && w.shape() == Shape{sx[0]}, shape_error, "scale_rows: input ", sx, " and weights ", w.shape(),
                   " (expected (N, C) and (N,))");
    const index_t rows = sx[0], cols = sx[1];
    const auto X = detail::contiguous_value(x);
    const auto Wt = detail::contiguous_value(w);
    auto Y = Tensor<T, B>::empty(sx);
    P::scale_rows(rows, cols, X.data(), Wt.data(), Y.data());
    return detail::make_result<T, B>(op_kind::scale_rows, std::move(Y), {x, w}, [=](Node<T, B>& nd) {
        P::scale_rows_bwd(rows, cols, X.data(), Wt.data(), nd.grad.data(), detail::parent_grad(nd, 0), detail::parent_grad(nd, 1));
    });
}
/// y[r] = a[r] + w[r] (b[r] - a[r]) for a, b: (N, C), w: (N): a per-row interpolation, ACT's
/// state update s + w (y - s) as one op (one pass each way, where add / scale_rows / scale
/// made four).
template <class T, class B>
Var<T, B> interpolate_rows(const Var<T, B>& a, const Var<T, B>& b, const Var<T, B>& w) {
    using P = primitives<B>;
    const Shape& sa = a.shape();
    DEPTHLAB_CHECK(sa.rank() == 2 && b.shape() == sa && w.shape() == Shape{sa[0]}, shape_error, "interpolate_rows: a ", sa, ", b ",
                   b.shape(), " and weights ", w.shape(), " (expected (N, C), (N, C) and (N,))");
    const index_t rows = sa[0], cols = sa[1];
    const auto A = detail::contiguous_value(a);
    const auto Bv = detail::contiguous_value(b);
    const auto Wt = detail::contiguous_value(w);
    auto Y = Tensor<T, B>::empty(sa);
    P::interpolate_rows(rows, cols, A.data(), Bv.data(), Wt.data(), Y.data());
    return detail::make_result<T, B>(op_kind::interpolate_rows, std::move(Y), {a, b, w}, [=](Node<T, B>& nd) {
        // a's and b's gradients cover them whole: the first to arrive is written, not added
        // (a and b the same node: a's write comes first, b's adds to it)
        const auto gA = detail::parent_grad_out(nd, 0);
        const auto gB = detail::parent_grad_out(nd, 1);
        const auto gW = detail::parent_grad_out(nd, 2);
        P::interpolate_rows_bwd(rows, cols, A.data(), Bv.data(), Wt.data(), nd.grad.data(), gA.data, gA.beta, gB.data, gB.beta, gW.data,
                                gW.beta);
    });
}

/// Embedding lookup: table (V, E), ids (n,) on the device, of shape `ids_shape` ->
/// ids_shape + (E).
template <class T, class B>
Var<T, B> embedding(const Var<T, B>& table, const Tensor<std::int64_t, B>& ids, Shape ids_shape) {
    DEPTHLAB_CHECK(table.shape().rank() == 2, shape_error, "embedding: table must be (vocab, dim), got ", table.shape());
    DEPTHLAB_CHECK(ids.defined() && ids_shape.numel() == ids.numel(), shape_error, "embedding: ", ids.numel(), " ids for shape ",
                   ids_shape);
    Var<T, B> rows = gather_rows(table, ids, op_kind::embedding);
    ids_shape.push_back(table.shape()[1]);
    rows.value() = rows.value().reshape(ids_shape);
    return rows;
}
template <class T, class B>
Var<T, B> embedding(const Var<T, B>& table, std::span<const std::int64_t> ids, Shape ids_shape) {
    DEPTHLAB_CHECK(table.shape().rank() == 2, shape_error, "embedding: table must be (vocab, dim), got ", table.shape());
    DEPTHLAB_CHECK(ids_shape.numel() == static_cast<index_t>(ids.size()), shape_error, "embedding: ", ids.size(),
                   " ids for shape ", ids_shape);
    detail::check_ids("embedding", ids, table.shape()[0], "id");
    return embedding(table, detail::upload_ids<B>(ids), std::move(ids_shape));
}

// ---------------------------------------------------------------- structure
namespace detail {
/// A view-producing op made concrete: value = contiguous copy of view(x.value());
/// backward adds the gradient into the same view of x's gradient.
template <class T, class B, class View>
Var<T, B> view_op(op_kind op, const Var<T, B>& x, View view) {
    auto Y = view(x.value()).contiguous();
    if (Y.shares_storage(x.value())) Y = Y.clone();
    return make_result<T, B>(op, std::move(Y), {x}, [=](Node<T, B>& nd) {
        auto& p = *nd.parents[0];
        if (!p.requires_grad) return;
        Tensor<T, B> target = view(p.grad_buffer());
        target.add_(nd.grad.reshape(target.shape()));
    });
}
}  // namespace detail

/// Elements [start, stop) along an axis.
template <class T, class B>
Var<T, B> slice(const Var<T, B>& x, int axis, index_t start, index_t stop) {
    (void)x.value().slice(axis, start, stop);  // validates the range
    return detail::view_op<T, B>(op_kind::slice, x, [=](const Tensor<T, B>& t) { return t.slice(axis, start, stop); });
}
/// Swap two axes (materialised: the result is contiguous).
template <class T, class B>
Var<T, B> transpose(const Var<T, B>& x, int a, int b) {
    (void)x.shape().axis(a);  // validate both axes
    (void)x.shape().axis(b);
    return detail::view_op<T, B>(op_kind::transpose, x, [=](const Tensor<T, B>& t) { return t.transpose(a, b); });
}
/// Same elements, new shape (one extent may be -1).
template <class T, class B>
Var<T, B> reshape(const Var<T, B>& x, const Shape& s) {
    const Shape out = x.value().reshape(s).shape();  // validates and resolves -1
    const Shape in = x.shape();
    auto Y = x.value().contiguous().reshape(out);
    return detail::make_result<T, B>(op_kind::reshape, std::move(Y), {x}, [=](Node<T, B>& nd) {
        if (detail::pass_grad_through(nd, 0)) return;
        if (const auto gX = detail::parent_grad_out(nd, 0); T* dX = gX.data)
            primitives<B>::axpby(in.numel(), T(1), nd.grad.data(), gX.beta, dX);
    });
}
/// Pieces of the given sizes along an axis (sizes must add up to the extent).
template <class T, class B>
std::vector<Var<T, B>> split(const Var<T, B>& x, const std::vector<index_t>& sizes, int axis) {
    const int a = x.shape().axis(axis);
    index_t total = 0;
    for (index_t s : sizes) total += s;
    DEPTHLAB_CHECK(total == x.shape()[a], shape_error, "split: sizes add up to ", total, " but axis ", axis, " of ", x.shape(),
                   " has ", x.shape()[a]);
    std::vector<Var<T, B>> out;
    index_t start = 0;
    for (index_t s : sizes) {
        const index_t st = start;
        out.push_back(detail::view_op<T, B>(op_kind::split, x, [=](const Tensor<T, B>& t) { return t.slice(a, st, st + s); }));
        start += s;
    }
    return out;
}
/// Join along an axis; all other extents must agree.
template <class T, class B>
Var<T, B> concat(const std::vector<Var<T, B>>& xs, int axis) {
    DEPTHLAB_CHECK(!xs.empty(), shape_error, "concat: no inputs");
    const Shape& s0 = xs[0].shape();
    const int a = s0.axis(axis);
    Shape out = s0;
    out[a] = 0;
    for (const auto& x : xs) {
        bool ok = x.shape().rank() == s0.rank();
        for (int k = 0; ok && k < s0.rank(); ++k) ok = k == a || x.shape()[k] == s0[k];
        DEPTHLAB_CHECK(ok, shape_error, "concat: shape ", x.shape(), " does not match ", s0, " outside axis ", axis);
        out[a] += x.shape()[a];
    }
    auto Y = Tensor<T, B>::empty(out);
    std::vector<index_t> offsets;
    index_t off = 0;
    for (const auto& x : xs) {
        offsets.push_back(off);
        Y.slice(a, off, off + x.shape()[a]).copy_(x.value());
        off += x.shape()[a];
    }
    return detail::make_result<T, B>(op_kind::concat, std::move(Y), xs, [=](Node<T, B>& nd) {
        for (std::size_t i = 0; i < nd.parents.size(); ++i) {
            auto& p = *nd.parents[i];
            if (!p.requires_grad) continue;
            p.grad_buffer().add_(nd.grad.slice(a, offsets[i], offsets[i] + p.value.shape()[a]));
        }
    });
}

}  // namespace depthlab
