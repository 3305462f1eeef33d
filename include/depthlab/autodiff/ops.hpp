#pragma once
// Differentiable ops. Each op checks its operands (throwing an error that names the op and
// the shapes), computes its value with primitives<B>, and registers a backward function
// written right below the forward. Backward functions accumulate into parents (`+=`).
// All op results are contiguous.
//
// Device-agnostic: ops reach memory only through primitives<B> and memory<B>. Index
// arguments (ids, targets, rows) are device tensors Tensor<std::int64_t, B>; the overloads
// taking a host std::span check the values on the host and upload them (an upload, not a
// synchronisation). Losses are device scalars: on a host backend a non-finite loss throws
// at once; on a device it is left to the caller, who reads the loss (one synchronisation)
// when it wants it, e.g. with checked_item().
//
// The ops live by concern in autodiff/ops/: common.hpp (shared machinery), arithmetic.hpp
// (matmul, linear, add, mul, bias, scale, activations), normalization.hpp (softmax family,
// cross-entropy, layer norm, a post-LN residual, dropout), structure.hpp (rows, concat, split, slice, reshape,
// transpose), reductions.hpp (sum, mean, mse). This header includes them all.
#include "depthlab/autodiff/ops/common.hpp"
#include "depthlab/autodiff/ops/arithmetic.hpp"
#include "depthlab/autodiff/ops/normalization.hpp"
#include "depthlab/autodiff/ops/structure.hpp"
#include "depthlab/autodiff/ops/reductions.hpp"
