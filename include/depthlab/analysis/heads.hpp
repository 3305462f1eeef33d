#pragma once
// Attention heads as units of the component-value analyses (Michel, Levy & Neubig 2019, "Are
// Sixteen Heads Really Better than One?"):
//
//   const auto heads = analysis::head_modules(model);          // every head of every attention sub-layer
//   const auto c = analysis::contribution(heads.modules, metric, {.clip = inf});   // one head switched off at a time
//   const auto imp = analysis::head_importance(model, heads, loss, batches);      // Michel et al.'s I_h
//   const auto k = analysis::criticality(model, analysis::head_modules(model, &theta0, &thetaf).modules, theta0, thetaf, metric);
//
// A head is switched off on its output columns before the output projection
// (MultiHeadAttention::set_head_off), with any ablation kind: zero, its mean output over a
// reference set (record_ablation_means(heads.modules, ...) first), or another sequence's
// output (resample). So contribution() and pruning_curve() take heads as they take sub-layers,
// with the same options. A head's parameters are slices (its rows of W_q, W_k, W_v and columns of W_o), not a name
// prefix: given θ⁰ and θᶠ, head_modules gives each head an interpolate function, so
// criticality() moves exactly those slices; rewinding and pruning's parameter counts refuse
// or skip heads.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "depthlab/analysis/modules.hpp"
#include "depthlab/autodiff/ops.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/nn/snapshot.hpp"
#include "depthlab/nn/transformer.hpp"

namespace depthlab::analysis {

/// Every head of a model's attention sub-layers, in model order, head by head.
template <class T, class B>
struct head_set {
    std::vector<module_ref> modules;                          // "decoder.1.self_attention.head2": ablate switches the head off
    std::vector<std::string> sublayer;                        // its attention sub-layer's name
    std::vector<int> head;                                    // its index there
    std::vector<nn::MultiHeadAttention<T, B>*> attention;     // its attention
};

namespace detail {
// One head of an attention as the target of the ablation kinds.
template <class T, class B>
struct head_target final : nn::ablation_target {
    nn::MultiHeadAttention<T, B>* attention;
    int head;
    head_target(nn::MultiHeadAttention<T, B>* a, int h) : attention(a), head(h) {}
    void set_ablation(nn::ablation_kind kind) override { attention->set_head_ablation(head, kind); }
    [[nodiscard]] bool is_on() const override { return attention->head_on(head); }
    [[nodiscard]] nn::mean_recording& means() override { return *attention; }
};

// Head h's slices of an attention's parameters, named under `sublayer`: its rows of W_q, W_k,
// W_v (in_proj_weight, in_proj_bias) and its columns of W_o (out_proj.weight; the output
// bias is every head's and stays), set to (1 − α)θ⁰ + αθᶠ (α = 0 and 1: exact copies).
template <class T, class B>
void interpolate_head(nn::Module<T, B>& model, const std::string& sublayer, int h, int heads, const nn::Snapshot<T, B>& initial,
                      const nn::Snapshot<T, B>& final_, double alpha) {
    const auto mix = [alpha](T a, T b) { return alpha == 0.0 ? a : alpha == 1.0 ? b : static_cast<T>(1.0 - alpha) * a + static_cast<T>(alpha) * b; };
    for (const char* which : {".in_proj_weight", ".in_proj_bias", ".out_proj.weight"}) {
        const std::string name = sublayer + which;
        Tensor<T, B>& p = model.parameter(name).value();
        const std::vector<T> a = initial.at(name).to_vector(), b = final_.at(name).to_vector();
        std::vector<T> v = p.to_vector();
        const index_t rows = p.dim(0), cols = p.shape().rank() == 2 ? p.dim(1) : 1;
        const bool out = std::string(which) == ".out_proj.weight";
        const index_t D = out ? rows : rows / 3, width = D / heads;
        for (index_t r = 0; r < rows; ++r)
            for (index_t c = 0; c < cols; ++c) {
                const bool mine = out ? c / width == h : (r % D) / width == h;
                const auto i = static_cast<std::size_t>(r * cols + c);
                if (mine) v[i] = mix(a[i], b[i]);
            }
        p.copy_(Tensor<T, B>::from(p.shape(), v));
    }
}
}  // namespace detail

/// Every head of every attention sub-layer of `model` (nn::sublayers whose branch is a
/// MultiHeadAttention), with the sub-layer's paper type and layer. Given θ⁰ and θᶠ, each
/// head also gets an interpolate function (its slices of W_q, W_k, W_v and W_o), so that
/// criticality() takes heads too. The functions point into `model` and the snapshots: keep
/// them alive while using them.
template <class T, class B>
head_set<T, B> head_modules(nn::Module<T, B>& model, const nn::Snapshot<T, B>* initial = nullptr, const nn::Snapshot<T, B>* final_ = nullptr) {
    DEPTHLAB_CHECK((initial == nullptr) == (final_ == nullptr), usage_error, "head_modules: give both snapshots (θ⁰ and θᶠ) or neither");
    head_set<T, B> out;
    for (auto& [name, r] : nn::sublayers(model)) {
        auto* res = dynamic_cast<nn::Residual<nn::MultiHeadAttention<T, B>, T, B>*>(r);
        if (!res) continue;
        nn::MultiHeadAttention<T, B>* attention = &res->branch;
        const int H = attention->config().heads;
        const auto [type, layer] = paper_type(name, r->type);
        for (int h = 0; h < H; ++h) {
            module_ref m;
            m.name = name + ".head" + std::to_string(h);
            m.type = type;
            m.layer = layer;
            m.ablate = [attention, h](bool off) { attention->set_head_off(h, off); };
            m.target = std::make_shared<detail::head_target<T, B>>(attention, h);
            m.training = [&model] { return model.is_training(); };
            if (initial) {
                const std::string sub = name;  // (a copy: clang 14 cannot capture a structured binding)
                m.interpolate = [&model, sub, h, H, initial, final_](double alpha) { detail::interpolate_head(model, sub, h, H, *initial, *final_, alpha); };
            }
            out.modules.push_back(std::move(m));
            out.sublayer.push_back(name);
            out.head.push_back(h);
            out.attention.push_back(attention);
        }
    }
    DEPTHLAB_CHECK(!out.modules.empty(), usage_error, "head_modules: the model has no attention sub-layers");
    return out;
}

/// Michel et al.'s head importance: I_h = Σ_i |∂L_i/∂ξ_h| over `batches` loss evaluations
/// loss(0), ..., loss(batches − 1), ξ_h a gate of 1 on head h's output (so the model computes
/// what it computes without gates). Every head must be on. The gates are removed and the
/// model's gradients cleared at the end, also on exceptions. Per-layer normalisation, if
/// wanted, is the caller's (Michel et al. divide each layer's scores by their L2 norm).
template <class T, class B>
std::vector<double> head_importance(nn::Module<T, B>& model, const head_set<T, B>& heads, const std::function<Var<T, B>(std::size_t)>& loss,
                                    std::size_t batches) {
    DEPTHLAB_CHECK(batches >= 1 && static_cast<bool>(loss), usage_error, "head_importance: ", batches, " batches and ",
                   loss ? "a" : "no", " loss function (at least 1 batch and a loss)");
    std::vector<nn::MultiHeadAttention<T, B>*> attns;
    for (auto* a : heads.attention)
        if (std::find(attns.begin(), attns.end(), a) == attns.end()) attns.push_back(a);
    for (auto* a : attns)
        DEPTHLAB_CHECK(!a->head_gate().defined() && a->heads_off() == 0, usage_error,
                       "head_importance: a head of the model is switched off (or gated); switch every head on first");
    struct cleanup {
        std::vector<nn::MultiHeadAttention<T, B>*>& attns;
        nn::Module<T, B>& model;
        ~cleanup() {
            for (auto* a : attns) a->set_head_gate(Var<T, B>());
            model.zero_grad();
        }
    } guard{attns, model};
    for (auto* a : attns) a->set_head_gate(Var<T, B>::parameter(Tensor<T, B>::ones({a->config().dim})));
    std::vector<double> score(heads.modules.size(), 0.0);
    for (std::size_t i = 0; i < batches; ++i) {
        model.zero_grad();
        for (auto* a : attns) a->head_gate().zero_grad();
        loss(i).backward();
        for (auto* a : attns) {
            if (!a->head_gate().grad().defined()) continue;  // an attention the loss does not reach: 0
            const auto g = a->head_gate().grad().to_vector();
            const index_t width = a->config().dim / a->config().heads;
            for (std::size_t j = 0; j < heads.modules.size(); ++j) {
                if (heads.attention[j] != a) continue;
                double d = 0;
                for (index_t c = 0; c < width; ++c) d += static_cast<double>(g[static_cast<std::size_t>(heads.head[j] * width + c)]);
                score[j] += std::abs(d);
            }
        }
    }
    return score;
}

}  // namespace depthlab::analysis
