#pragma once
// Compiled mode (optional; header-only stays the default). A program built with
// DEPTHLAB_COMPILED defined — CMake: link depthlab::compiled instead of depthlab::depthlab —
// sees the common instantiations below declared `extern template`: the layers, models,
// optimisers, the training loop, the autodiff ops and the analyses' templates (snapshots,
// criticality, the default module list of a seq2seq model) for float and double on the CPU are
// then compiled once, in the depthlab_compiled library (src/compiled/), not in every
// translation unit that uses them. Members defined inside a class body are inline, and an
// `extern template` does not stop the compiler from instantiating and optimising them where
// they are used (it wants them for inlining), together with everything they call. So the
// heavy members of the listed classes (constructors that build a model, forward passes, the
// training loop, optimiser steps, checkpoint I/O) are defined outside their class bodies:
// not inline, they stay in the library. Small accessors stay in the class, to be inlined.
// See docs/compile-time.md for the measured effect.
//
// The one list serves both sides: DEPTHLAB_COMMON_INSTANTIATIONS(extern template, T) here,
// DEPTHLAB_COMMON_INSTANTIATIONS(template, T) in the library. Non-template functions that
// pull in heavy code (the safetensors reader and writer, with the JSON parser) use the
// switch of core/out_of_line.hpp instead: src/compiled/out_of_line.cpp defines them once.
#include "depthlab/analysis/modules.hpp"
#include "depthlab/analysis/scores.hpp"
#include "depthlab/autodiff/attention.hpp"
#include "depthlab/autodiff/ops.hpp"
#include "depthlab/backend/cpu/cpu.hpp"
#include "depthlab/halting/act.hpp"
#include "depthlab/halting/act_albert.hpp"
#include "depthlab/io/config.hpp"
#include "depthlab/nn/classification.hpp"
#include "depthlab/nn/language_model.hpp"
#include "depthlab/nn/models.hpp"
#include "depthlab/nn/snapshot.hpp"
#include "depthlab/nn/transformer.hpp"
#include "depthlab/optim/adam.hpp"
#include "depthlab/optim/lamb.hpp"
#include "depthlab/optim/sgd.hpp"
#include "depthlab/train/trainer.hpp"

// (KW: `extern template` or `template`; T: float or double; the backend is the CPU)
#define DEPTHLAB_COMMON_INSTANTIATIONS(KW, T)                                                                                  \
    namespace depthlab {                                                                                                      \
    KW class Tensor<T, backend::cpu>;                                                                                          \
    KW class Var<T, backend::cpu>;                                                                                             \
    KW Var<T, backend::cpu> matmul<T, backend::cpu>(const Var<T, backend::cpu>&, const Var<T, backend::cpu>&, bool, bool);   \
    KW Var<T, backend::cpu> linear<T, backend::cpu>(const Var<T, backend::cpu>&, const Var<T, backend::cpu>&,                 \
                                                    const Var<T, backend::cpu>&);                                             \
    KW Var<T, backend::cpu> add<T, backend::cpu>(const Var<T, backend::cpu>&, const Var<T, backend::cpu>&);                   \
    KW Var<T, backend::cpu> mul<T, backend::cpu>(const Var<T, backend::cpu>&, const Var<T, backend::cpu>&);                   \
    KW Var<T, backend::cpu> bias<T, backend::cpu>(const Var<T, backend::cpu>&, const Var<T, backend::cpu>&);                  \
    KW Var<T, backend::cpu> scale<T, backend::cpu>(const Var<T, backend::cpu>&, T);                                           \
    KW Var<T, backend::cpu> gelu<T, backend::cpu>(const Var<T, backend::cpu>&);                                               \
    KW Var<T, backend::cpu> gelu_erf<T, backend::cpu>(const Var<T, backend::cpu>&);                                           \
    KW Var<T, backend::cpu> relu<T, backend::cpu>(const Var<T, backend::cpu>&);                                               \
    KW Var<T, backend::cpu> tanh<T, backend::cpu>(const Var<T, backend::cpu>&);                                               \
    KW Var<T, backend::cpu> sigmoid<T, backend::cpu>(const Var<T, backend::cpu>&);                                            \
    KW Var<T, backend::cpu> softmax<T, backend::cpu>(const Var<T, backend::cpu>&, T, const Tensor<T, backend::cpu>&);         \
    KW Var<T, backend::cpu> log_softmax<T, backend::cpu>(const Var<T, backend::cpu>&);                                        \
    KW Var<T, backend::cpu> layer_norm<T, backend::cpu>(const Var<T, backend::cpu>&, const Var<T, backend::cpu>&,             \
                                                        const Var<T, backend::cpu>&, T);                                      \
    KW Var<T, backend::cpu> dropout<T, backend::cpu>(const Var<T, backend::cpu>&, T, Generator&, bool);                       \
    KW Var<T, backend::cpu> residual_layer_norm<T, backend::cpu>(const Var<T, backend::cpu>&, const Var<T, backend::cpu>&,    \
                                                                 const Var<T, backend::cpu>&, const Var<T, backend::cpu>&, T, T,  \
                                                                 Generator&, bool);                                           \
    KW Var<T, backend::cpu> sum<T, backend::cpu>(const Var<T, backend::cpu>&);                                                \
    KW Var<T, backend::cpu> mean<T, backend::cpu>(const Var<T, backend::cpu>&);                                               \
    KW Var<T, backend::cpu> slice<T, backend::cpu>(const Var<T, backend::cpu>&, int, index_t, index_t);                       \
    KW Var<T, backend::cpu> transpose<T, backend::cpu>(const Var<T, backend::cpu>&, int, int);                                \
    KW Var<T, backend::cpu> reshape<T, backend::cpu>(const Var<T, backend::cpu>&, const Shape&);                              \
    KW Var<T, backend::cpu> concat<T, backend::cpu>(const std::vector<Var<T, backend::cpu>>&, int);                           \
    KW Var<T, backend::cpu> cross_entropy<T, backend::cpu>(const Var<T, backend::cpu>&, const Tensor<std::int64_t, backend::cpu>&, \
                                                           std::int64_t, T);                                                  \
    KW Var<T, backend::cpu> cross_entropy<T, backend::cpu>(const Var<T, backend::cpu>&, std::span<const std::int64_t>,        \
                                                           std::int64_t, T);                                                  \
    KW Var<T, backend::cpu> cross_entropy_rows<T, backend::cpu>(const Var<T, backend::cpu>&,                                  \
                                                                const Tensor<std::int64_t, backend::cpu>&, std::int64_t, T);  \
    KW Var<T, backend::cpu> cross_entropy_rows<T, backend::cpu>(const Var<T, backend::cpu>&, std::span<const std::int64_t>,   \
                                                                std::int64_t, T);                                             \
    KW Var<T, backend::cpu> gather_rows<T, backend::cpu>(const Var<T, backend::cpu>&, std::span<const std::int64_t>, op_kind); \
    KW nn::accuracy_count nn::accuracy<T, backend::cpu>(const Var<T, backend::cpu>&, std::span<const std::int64_t>,           \
                                                        std::int64_t);                                                        \
    KW nn::accuracy_count nn::accuracy<T, backend::cpu>(const Tensor<T, backend::cpu>&, std::span<const std::int64_t>,        \
                                                        std::int64_t);                                                        \
    KW class nn::Snapshot<T, backend::cpu>;                                                                                   \
    KW analysis::criticality_result analysis::criticality<T, backend::cpu>(                                                   \
        nn::Module<T, backend::cpu>&, const std::vector<analysis::module_ref>&, const nn::Snapshot<T, backend::cpu>&,         \
        const nn::Snapshot<T, backend::cpu>&, const analysis::metric_fn&, const analysis::criticality_options&);              \
    KW std::vector<analysis::module_ref> analysis::default_modules<nn::Seq2SeqTransformer<T, backend::cpu>>(                 \
        nn::Seq2SeqTransformer<T, backend::cpu>&, std::optional<bool>);                                                      \
    KW class nn::Module<T, backend::cpu>;                                                                                     \
    KW class optim::Optimizer<T, backend::cpu>;                                                                               \
    KW class optim::detail::AdamBase<T, backend::cpu>;                                                                        \
    KW class nn::Linear<T, backend::cpu>;                                                                                     \
    KW class nn::LayerNorm<T, backend::cpu>;                                                                                  \
    KW class nn::Embedding<T, backend::cpu>;                                                                                  \
    KW class nn::MultiHeadAttention<T, backend::cpu>;                                                                         \
    KW class nn::FeedForward<T, backend::cpu>;                                                                                \
    KW class nn::EncoderLayer<T, backend::cpu>;                                                                               \
    KW class nn::DecoderLayer<T, backend::cpu>;                                                                               \
    KW class nn::Seq2SeqTransformer<T, backend::cpu>;                                                                         \
    KW class nn::GPT2<T, backend::cpu>;                                                                                       \
    KW class nn::Albert<T, backend::cpu, nn::tied>;                                                                           \
    KW class nn::Albert<T, backend::cpu, nn::untied>;                                                                         \
    KW class halting::ActEncoder<T, backend::cpu, halting::act>;                                                              \
    KW class halting::ActAlbert<T, backend::cpu, halting::act>;                                                               \
    KW class optim::SGD<T, backend::cpu>;                                                                                     \
    KW class optim::Adam<T, backend::cpu>;                                                                                    \
    KW class optim::AdamW<T, backend::cpu>;                                                                                   \
    KW class optim::Lamb<T, backend::cpu>;                                                                                    \
    KW class train::checkpointer<T, backend::cpu>;                                                                             \
    KW class train::Trainer<T, backend::cpu>;                                                                                 \
    }

// The model configurations' metadata I/O (io/config.hpp), one config type C at a time.
#define DEPTHLAB_CONFIG_INSTANTIATIONS(KW, C)                                                          \
    namespace depthlab::io {                                                                          \
    KW void save_config<C>(metadata_map&, const std::string&, const C&);                              \
    KW void load_config<C>(const metadata_map&, const std::string&, C&);                              \
    KW C load_config<C>(const metadata_map&, const std::string&);                                     \
    }
#define DEPTHLAB_ALL_CONFIG_INSTANTIATIONS(KW)                     \
    DEPTHLAB_CONFIG_INSTANTIATIONS(KW, nn::transformer_config)     \
    DEPTHLAB_CONFIG_INSTANTIATIONS(KW, nn::seq2seq_config)         \
    DEPTHLAB_CONFIG_INSTANTIATIONS(KW, nn::albert_config)          \
    DEPTHLAB_CONFIG_INSTANTIATIONS(KW, nn::gpt2_config)            \
    DEPTHLAB_CONFIG_INSTANTIATIONS(KW, halting::act_options)

#if defined(DEPTHLAB_COMPILED) && !defined(DEPTHLAB_COMPILED_LIBRARY)
DEPTHLAB_COMMON_INSTANTIATIONS(extern template, float)
DEPTHLAB_COMMON_INSTANTIATIONS(extern template, double)
DEPTHLAB_ALL_CONFIG_INSTANTIATIONS(extern template)
#endif
