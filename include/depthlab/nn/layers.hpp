#pragma once
// Basic layers: Linear, LayerNorm, Embedding. Parameter names and layouts follow PyTorch
// (Linear.weight is (out, in)), so state dicts map one to one.
#include <cmath>
#include <concepts>
#include <span>
#include <type_traits>

#include "depthlab/autodiff/ops.hpp"
#include "depthlab/nn/module.hpp"

namespace depthlab::nn {

/// How weights are initialised.
enum class init_scheme {
    pytorch,  // nn.Linear default: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias
    bert,     // N(0, 0.02) weights, zero biases (BERT / ALBERT)
    xavier,   // U(-sqrt(6/(in+out)), +) weights, zero biases (Transformer base, fairseq)
};
/// The names of the schemes, in the enum's order (configs store them: io/config.hpp).
inline constexpr const char* init_scheme_names[] = {"pytorch", "bert", "xavier"};
constexpr std::span<const char* const> enum_names(init_scheme) { return init_scheme_names; }

template <class T, class B = backend::cpu>
class Linear : public Module<T, B> {
public:
    Linear(index_t in, index_t out, Generator& gen, init_scheme init = init_scheme::pytorch, bool with_bias = true)
        : in_features(in), out_features(out) {
        Tensor<T, B> w, b;
        switch (init) {
            case init_scheme::pytorch: {
                const double bound = 1.0 / std::sqrt(static_cast<double>(in));
                w = Tensor<T, B>::uniform({out, in}, gen, -bound, bound);
                b = Tensor<T, B>::uniform({out}, gen, -bound, bound);
                break;
            }
            case init_scheme::bert:
                w = Tensor<T, B>::randn({out, in}, gen, 0.02);
                b = Tensor<T, B>::zeros({out});
                break;
            case init_scheme::xavier: {
                const double bound = std::sqrt(6.0 / static_cast<double>(in + out));
                w = Tensor<T, B>::uniform({out, in}, gen, -bound, bound);
                b = Tensor<T, B>::zeros({out});
                break;
            }
        }
        weight = this->register_parameter("weight", std::move(w));
        if (with_bias) bias = this->register_parameter("bias", std::move(b));
    }
    /// x: (..., in) -> (..., out)
    Var<T, B> operator()(const Var<T, B>& x) const { return linear(x, weight, bias); }

    index_t in_features, out_features;
    Var<T, B> weight, bias;
};

template <class T, class B = backend::cpu>
class LayerNorm : public Module<T, B> {
public:
    explicit LayerNorm(index_t dim, double eps = 1e-5) : eps(eps) {
        weight = this->register_parameter("weight", Tensor<T, B>::ones({dim}));
        bias = this->register_parameter("bias", Tensor<T, B>::zeros({dim}));
    }
    /// x: (..., dim)
    Var<T, B> operator()(const Var<T, B>& x) const { return layer_norm(x, weight, bias, static_cast<T>(eps)); }

    double eps;
    Var<T, B> weight, bias;
};

template <class T, class B = backend::cpu>
class Embedding : public Module<T, B> {
public:
    Embedding(index_t num, index_t dim, Generator& gen, double stddev = 1.0) {
        weight = this->register_parameter("weight", Tensor<T, B>::randn({num, dim}, gen, stddev));
    }
    /// ids of shape `shape` -> shape + (dim). An empty batch is a usage_error here, at the
    /// model's entry, rather than a GEMM of no rows deep inside it.
    Var<T, B> operator()(std::span<const std::int64_t> ids, const Shape& shape) const {
        DEPTHLAB_CHECK(shape.numel() > 0, usage_error, "Embedding: an empty batch (ids of shape ", shape, "): a batch needs at least one token");
        return embedding(weight, ids, shape);
    }

    [[nodiscard]] index_t num_embeddings() const { return weight.shape()[0]; }
    [[nodiscard]] index_t dim() const { return weight.shape()[1]; }
    Var<T, B> weight;
};

}  // namespace depthlab::nn
