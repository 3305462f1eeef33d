#pragma once
// Every routine of primitives<B>, listed once: its name and its parameters, T being the
// element type. A backend that is compiled apart from its callers (CUDA) declares its
// routines and instantiates them from this list; a backend defined in headers (the CPU's
// host_primitives) is checked against it (tests/test_core.cpp: the same signatures).
// Adding a primitive: a line here, its CPU body in backend/cpu/cpu.hpp, its kernel in
// backend/cuda/primitives.cuh — nothing else.
//
//     #define DECLARE(name, params) template <class T> static void name params;
//     DEPTHLAB_PRIMITIVES(DECLARE)
//
// The semantics of each routine are documented at its CPU definition.
#include <cstdint>

#include "depthlab/backend/backend.hpp"
#include "depthlab/backend/elementwise.hpp"
#include "depthlab/backend/update_rules.hpp"
#include "depthlab/core/rng.hpp"
#include "depthlab/core/shape.hpp"

// X(name, (parameters)) for every routine, instantiated for float and double.
#define DEPTHLAB_PRIMITIVES(X) \
    /* ---- elementwise ---- */ \
    X(fill, (index_t n, T v, T* y)) \
    X(copy_strided, (const Shape& shape, const T* src, const Shape& sst, T* dst, const Shape& dst_st, bool accumulate)) \
    X(add, (index_t n, const T* a, const T* b, T* y)) \
    X(mul, (index_t n, const T* a, const T* b, T* y)) \
    X(mul_acc, (index_t n, const T* a, const T* b, T* y)) \
    X(axpby, (index_t n, T alpha, const T* x, T beta, T* y)) \
    /* ---- row broadcast: x (rows, cols), v (cols) ---- */ \
    X(add_row_vector, (index_t rows, index_t cols, const T* x, const T* v, T* y)) \
    X(mul_row_vector, (index_t rows, index_t cols, const T* x, const T* v, T* y)) \
    X(mul_row_vector_acc, (index_t rows, index_t cols, const T* dy, const T* v, T* dx)) \
    /* column sums: one thread per column walks the rows in order (deterministic, coalesced) */ \
    X(sum_rows_acc, (index_t rows, index_t cols, const T* x, T* v, bool accumulate = true)) \
    X(sum_rows_mul_acc, (index_t rows, index_t cols, const T* a, const T* b, T* v)) \
    X(scale_rows, (index_t rows, index_t cols, const T* x, const T* w, T* y)) \
    X(scale_rows_bwd, (index_t rows, index_t cols, const T* x, const T* w, const T* dy, T* dx, T* dw)) \
    X(interpolate_rows, (index_t rows, index_t cols, const T* a, const T* b, const T* w, T* y)) \
    X(interpolate_rows_bwd, (index_t rows, index_t cols, const T* a, const T* b, const T* w, const T* dy, T* da, T beta_a, T* db, T beta_b, T* dw, T beta_w = T(1))) \
    /* ---- activations ---- */ \
    X(gelu_fwd, (index_t n, const T* x, T* y)) \
    X(gelu_bwd, (index_t n, const T* x, const T* dy, T* dx, bool accumulate = true)) \
    X(gelu_erf_fwd, (index_t n, const T* x, T* y)) \
    X(gelu_erf_bwd, (index_t n, const T* x, const T* dy, T* dx, bool accumulate = true)) \
    X(relu_fwd, (index_t n, const T* x, T* y)) \
    X(relu_bwd, (index_t n, const T* x, const T* dy, T* dx, bool accumulate = true)) \
    X(tanh_fwd, (index_t n, const T* x, T* y)) \
    X(tanh_bwd, (index_t n, const T* y, const T* dy, T* dx, bool accumulate = true)) \
    X(sigmoid_fwd, (index_t n, const T* x, T* y)) \
    X(sigmoid_bwd, (index_t n, const T* y, const T* dy, T* dx, bool accumulate = true)) \
    X(log_sigmoid_fwd, (index_t n, const T* x, T* y)) \
    X(log_sigmoid_bwd, (index_t n, const T* x, const T* dy, T* dx, bool accumulate = true)) \
    /* ---- reductions (into device memory) ---- */ \
    X(sum_to, (index_t n, const T* x, T scale, T* out)) \
    X(add_scaled_by, (index_t n, const T* s, T factor, const T* x, T* y)) \
    X(nonfinite_flag, (index_t n, const T* x, std::int32_t* flag)) \
    /* ---- softmax family (last axis), one block per row ---- */ \
    X(softmax_fwd, (index_t rows, index_t cols, const T* x, T scale, const T* mask, const row_broadcast& map, T* y)) \
    X(softmax_bwd, (index_t rows, index_t cols, const T* y, const T* dy, T scale, T* dx, bool accumulate = true)) \
    X(log_softmax_fwd, (index_t rows, index_t cols, const T* x, T* y)) \
    X(log_softmax_bwd, (index_t rows, index_t cols, const T* y, const T* dy, T* dx)) \
    /* ---- layer norm (last axis) ---- */ \
    X(layernorm_fwd, (index_t rows, index_t cols, const T* x, const T* gamma, const T* beta, T eps, T* y, T* mean, T* rstd)) \
    X(layernorm_bwd, (index_t rows, index_t cols, const T* x, const T* dy, const T* gamma, const T* mean, const T* rstd, T* dx, T* dgamma, T* dbeta, bool accumulate_dx = true, bool accumulate_params = true)) \
    /* ---- a post-LN residual: z = x + y * dropout mask (dropout_apply's from `first`; p 0: none), out = layer norm of z ---- */ \
    X(residual_layernorm_fwd, (index_t rows, index_t cols, const T* x, const T* y, T p, const Generator& gen, std::uint64_t first, const T* gamma, const T* beta, T eps, T* z, T* out, T* mean, T* rstd)) \
    /* its backward to x and y: dz = layer norm's input gradient, dx = dz, dy = dz * mask (+= with accumulate; null: skipped) */ \
    X(residual_layernorm_bwd, (index_t rows, index_t cols, const T* z, const T* dout, const T* gamma, const T* mean, const T* rstd, T p, const Generator& gen, std::uint64_t first, T* dx, bool accumulate_dx, T* dy, bool accumulate_dy)) \
    /* ---- cross-entropy over rows of logits (rows, V) ---- */ \
    X(cross_entropy_fwd, (index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore, T smoothing, T* loss, T* lse)) \
    X(cross_entropy_mean, (index_t rows, const T* loss, const std::int64_t* target, std::int64_t ignore, T* mean, T* inv_count)) \
    X(cross_entropy_bwd, (index_t rows, index_t V, const T* logits, const std::int64_t* target, std::int64_t ignore, T smoothing, const T* lse, const T* g, index_t g_stride, const T* g_scale, T* dlogits)) \
    /* greedy decoding's choice per row of logits: out[3r..3r+3) = {first argmax, its log-probability, EOS's} */ \
    X(greedy_pick, (index_t rows, index_t V, const T* logits, std::int64_t eos, double* out)) \
    /* beam search's candidates per row: with score = base[r] + log-probability, the `take` best (score, id) */ \
    /* in elementwise::beam_before order, then base[r] + EOS's log-probability: 2·take + 1 doubles a row */ \
    X(beam_pick, (index_t rows, index_t V, const T* logits, const double* base, index_t take, std::int64_t eos, double* out)) \
    /* ---- rows by index ---- */ \
    X(gather_rows, (index_t n, index_t cols, const T* table, index_t limit, const std::int64_t* ids, T* out, bool accumulate = false)) \
    X(gather_rows_strided, (index_t n, index_t cols, index_t src_stride, index_t dst_stride, const T* table, index_t limit, const std::int64_t* ids, T* out, bool accumulate = false)) \
    /* repeated ids accumulate in index order: one thread per column walks the ids */ \
    X(scatter_add_rows, (index_t n, index_t cols, const T* src, index_t limit, const std::int64_t* ids, T* table, bool accumulate = true)) \
    X(scatter_rows_set, (index_t n, index_t cols, const T* src, index_t limit, const std::int64_t* ids, T* dst)) \
    X(rows_axpy, (index_t n, index_t cols, T alpha, const T* src, index_t limit, const std::int64_t* ids, T* dst)) \
    /* ---- dropout (the CPU's masks: the same Philox words) ---- */ \
    X(dropout_mask, (index_t n, T p, const Generator& gen, std::uint64_t first, T* mask)) \
    /* y = x * mask (or y += with accumulate), the mask drawn in place from the same words: no mask stored */ \
    X(dropout_apply, (index_t n, T p, const Generator& gen, std::uint64_t first, const T* x, T* y, bool accumulate = false)) \
    /* ---- ACT's halting step over n tokens (elementwise::act_halting): ra, nh its 0/1 masks ---- */ \
    X(act_halting_fwd, (index_t n, const T* p, const T* cum, const T* r, const T* ra, const T* nh, T* w, T* cum_out, T* r_out)) \
    /* its decision over n tokens (elementwise::act_decide): writes the masks ra, nh from p, cum and active; state (n, 2) holds \
       each token's iterations run and first iteration with a NaN probability, updated in place */ \
    X(act_decide, (index_t n, const T* p, const T* cum, const T* active, T threshold, int iteration, int min_iterations, T* ra, T* nh, T* state)) \
    /* the gradients of one output: da (=|+=) ca(ra, nh) · dy, db likewise (da or db may be null) */ \
    X(act_halting_bwd, (index_t n, const T* ra, const T* nh, const T* dy, elementwise::halting_coefficient<T> ca, T* da, T beta_a, \
                        elementwise::halting_coefficient<T> cb, T* db, T beta_b)) \
    /* ---- optimiser updates ---- */ \
    X(sgd_update, (index_t n, T* w, const T* g, T* buf, const optim::rules::sgd<T>& rule)) \
    X(adam_update, (index_t n, T* w, const T* g, T* m, T* v, const optim::rules::adam<T>& rule)) \
    X(lamb_moments, (index_t n, const T* w, const T* g, T* m, T* v, const optim::rules::adam_moments<T>& am, T wd, double* sums)) \
    X(lamb_apply, (index_t n, T* w, const T* m, const T* v, const optim::rules::adam_moments<T>& am, T wd, double lr, const double* sums)) \
    X(sum_squares_to, (index_t n, const T* x, double* out)) \
    X(clip_scale, (index_t n, T* x, const double* parts, index_t k, double max_norm)) \
    /* multi-tensor forms: `count` tensors described by a host array, one call for all of them */ \
    X(adam_update_many, (index_t count, const optim::rules::adam_tensor<T>* tensors)) \
    X(lamb_step_many, (index_t count, const optim::rules::lamb_tensor<T>* tensors)) \
    X(sum_squares_many, (index_t count, const optim::rules::tensor_span<T>* tensors, double* out)) \
    X(clip_scale_many, (index_t count, const optim::rules::tensor_span<T>* tensors, const double* parts, index_t k, double max_norm)) \
    /* ---- GEMM ---- */ \
    X(gemm, (const gemm_args& g, T alpha, const T* a, const T* b, T beta, T* c)) \
    X(gemm_bias, (const gemm_args& g, const T* a, const T* b, const T* bias, T* c)) \
    /* a linear layer with GELU (tanh form), one product, packed rows (ldc = n): pre = op(a) op(b) + bias, c = gelu(pre) */ \
    X(gemm_bias_gelu, (const gemm_args& g, const T* a, const T* b, const T* bias, T* pre, T* c)) \
    /* a linear layer's weight and bias gradients from dY = a (trans_a, lda = m, one product): */ \
    /* c = op(a) op(b) + beta c, and db[i] = Σ_k a(k, i) written */ \
    X(gemm_bias_grad, (const gemm_args& g, const T* a, const T* b, T beta, T* c, T* db)) \
    /* out = the bf16 copy of a float operand read in `layout` (gemm_args::a_bf16 / b_bf16); double: none */ \
    X(prepare_bf16, (const operand_layout& layout, const T* src, bf16_operand& out)) \
    /* out[i] = the address table of product requests[i] (gemm_addresses), all in one launch; empty where none is needed or known */ \
    X(gemm_address_tables, (index_t count, const gemm_table_request<T>* requests, gemm_addresses* out))

// The routines also instantiated for the index and flag types (std::int64_t, std::int32_t),
// which are only filled and copied.
#define DEPTHLAB_INDEX_PRIMITIVES(X) \
    X(fill)                          \
    X(copy_strided)
