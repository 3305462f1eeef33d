#pragma once
// Transformer building blocks: multi-head attention, feed-forward, residual sub-layers
// (post-LN by default, pre-LN as an option), encoder and decoder layers, and stacks whose
// depth policy is a template argument: `untied` (L distinct layers) or `tied` (one layer
// applied L times, ALBERT). Sizes are run-time; the number of iterations of a stack is a
// run-time argument, so a tied model can run deeper or shallower than it was trained.
//
// Sub-layers are the unit of the component analyses: each `Residual` is addressable by its
// name ("encoder.3.self_attention", "decoder.5.cross_attention", "decoder.5.feed_forward"),
// owns its branch and its LayerNorm (parameters under that name), and can be switched off:
// then its branch outputs zero and only the residual path remains — in a post-LN layer the
// LayerNorm still normalises that path (y = LN(x)); in a pre-LN layer y = x.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "depthlab/autodiff/attention.hpp"
#include "depthlab/nn/ablation.hpp"
#include "depthlab/nn/layers.hpp"

namespace depthlab::nn {

/// The feed-forward activation. gelu: the tanh approximation (BERT/ALBERT's TF code, HF's
/// "gelu_new", PyTorch's approximate='tanh'); gelu_erf: the exact erf form (PyTorch's
/// default F.gelu and activation="gelu", HF BERT's "gelu"). New values go at the end (the
/// config files store the names, io/config.hpp, in this order).
enum class activation { gelu, relu, gelu_erf };
/// The names of the activations, in the enum's order (configs store them: io/config.hpp).
inline constexpr const char* activation_names[] = {"gelu", "relu", "gelu_erf"};
constexpr std::span<const char* const> enum_names(activation) { return activation_names; }

/// x through activation a.
template <class T, class B>
Var<T, B> activate(activation a, const Var<T, B>& x) {
    switch (a) {
        case activation::relu: return relu(x);
        case activation::gelu_erf: return gelu_erf(x);
        default: return gelu(x);
    }
}
/// activation a of the linear layer y = x W^T + b (b may be undefined): GELU (tanh form) after
/// a biased product is one op (linear_gelu: on a GPU one GEMM with a GELU epilogue).
template <class T, class B>
Var<T, B> linear_activate(activation a, const Var<T, B>& x, const Var<T, B>& W, const Var<T, B>& b) {
    if (a == activation::gelu && b.defined()) return linear_gelu(x, W, b);
    return activate(a, linear(x, W, b));
}

struct transformer_config {
    index_t dim = 256;              // model width H
    int heads = 4;
    index_t ff_dim = 1024;
    activation act = activation::gelu;  // GELU, the tanh approximation (gelu_erf: the exact form)
    double dropout = 0.1;           // on residual branches and after the FF activation
    double attention_dropout = 0.1; // on attention probabilities
    bool norm_first = false;        // false: post-LN (both papers); true: pre-LN
    double ln_eps = 1e-5;
    init_scheme init = init_scheme::pytorch;

    /// Throws usage_error naming the first bad field (`where`: the layer that checks).
    void validate(const char* where) const {
        DEPTHLAB_CHECK(dim > 0 && heads > 0 && ff_dim > 0, usage_error, where, ": dim ", dim, ", heads ", heads, ", ff_dim ", ff_dim,
                       " must all be > 0");
        DEPTHLAB_CHECK(dim % heads == 0, usage_error, where, ": dim ", dim, " not divisible by ", heads, " heads");
        DEPTHLAB_CHECK(dropout >= 0 && dropout < 1 && attention_dropout >= 0 && attention_dropout < 1, usage_error, where, ": dropout ",
                       dropout, " and attention_dropout ", attention_dropout, " must be in [0, 1)");
        DEPTHLAB_CHECK(ln_eps > 0, usage_error, where, ": ln_eps ", ln_eps, " must be > 0");
    }
};
/// transformer_config's fields by name (io::save_config / load_config).
template <class C, class F>
    requires std::same_as<std::remove_const_t<C>, transformer_config>
void config_fields(C& c, F&& f) {
    f("dim", c.dim);
    f("heads", c.heads);
    f("ff_dim", c.ff_dim);
    f("activation", c.act);
    f("dropout", c.dropout);
    f("attention_dropout", c.attention_dropout);
    f("norm_first", c.norm_first);
    f("ln_eps", c.ln_eps);
    f("init", c.init);
}

// ---- masks (additive: 0 keeps, -inf removes) ----
/// (B, 1, 1, T) from per-sequence lengths: positions >= length are padding.
template <class T, class B = backend::cpu>
Tensor<T, B> padding_mask(const std::vector<index_t>& lengths, index_t T_) {
    return key_padding_mask<T, B>(lengths, T_);
}
namespace detail {
/// The values of causal_mask, row-major (T, T), built on the host.
template <class T>
std::vector<T> causal_values(index_t T_) {
    std::vector<T> m(static_cast<std::size_t>(T_ * T_), T(0));
    for (index_t i = 0; i < T_; ++i)
        for (index_t j = i + 1; j < T_; ++j) m[i * T_ + j] = -std::numeric_limits<T>::infinity();
    return m;
}
}  // namespace detail
/// (T, T): query i sees keys j <= i.
template <class T, class B = backend::cpu>
Tensor<T, B> causal_mask(index_t T_) {
    return Tensor<T, B>::from({T_, T_}, detail::causal_values<T>(T_));
}
/// (B, 1, T, T): causal and padding together (decoder self-attention on padded batches).
template <class T, class B = backend::cpu>
Tensor<T, B> causal_padding_mask(const std::vector<index_t>& lengths, index_t T_) {
    // built on the host, then uploaded once
    const auto pad = depthlab::detail::key_padding_values<T>(lengths, T_);
    const auto cau = detail::causal_values<T>(T_);
    const index_t Bn = static_cast<index_t>(lengths.size());
    std::vector<T> m(static_cast<std::size_t>(Bn * T_ * T_));
    for (index_t b = 0; b < Bn; ++b)
        for (index_t i = 0; i < T_; ++i)
            for (index_t j = 0; j < T_; ++j) m[(b * T_ + i) * T_ + j] = pad[b * T_ + j] + cau[i * T_ + j];
    return Tensor<T, B>::from({Bn, 1, T_, T_}, m);
}

// ---- attention ----
/// Multi-head attention with PyTorch's parameter layout: in_proj_weight (3D, D) packs
/// W_q, W_k, W_v; out_proj is a Linear(D, D). Its heads are units of the analyses: each can
/// be switched off with any ablation kind (set_head_off, set_head_ablation) or scaled by a
/// gate (set_head_gate), acting on its head_dim columns before the output projection.
template <class T, class B = backend::cpu>
class MultiHeadAttention : public Module<T, B>, public mean_recording {
public:
    MultiHeadAttention(const transformer_config& cfg, Generator& gen)
        : head_off_(static_cast<std::size_t>(cfg.heads), false), head_kind_(static_cast<std::size_t>(cfg.heads), ablation_kind::zero), cfg_(cfg), rng_(&gen) {
        cfg.validate("MultiHeadAttention");
        const index_t D = cfg.dim;
        Tensor<T, B> w = cfg.init == init_scheme::bert
                             ? Tensor<T, B>::randn({3 * D, D}, gen, 0.02)
                             : Tensor<T, B>::uniform({3 * D, D}, gen, -std::sqrt(6.0 / (4.0 * D)), std::sqrt(6.0 / (4.0 * D)));
        in_proj_weight = this->register_parameter("in_proj_weight", std::move(w));
        in_proj_bias = this->register_parameter("in_proj_bias", Tensor<T, B>::zeros({3 * D}));
        out_proj = &this->register_module("out_proj", std::make_unique<Linear<T, B>>(D, D, gen, cfg.init));
        if (cfg.init == init_scheme::pytorch) out_proj->bias.value().zero_();  // as nn.MultiheadAttention
    }
    /// Self-attention. x: (B, T, D); mask additive, broadcastable to (B, H, T, T).
    Var<T, B> operator()(const Var<T, B>& x, const Tensor<T, B>& mask = {}) const {
        const index_t D = cfg_.dim;
        const Var<T, B> qkv = linear(x, in_proj_weight, in_proj_bias);  // (B, T, 3D)
        return project_out(attention<T, B>({qkv, 0}, {qkv, D}, {qkv, 2 * D}, D, options(), mask, rng_));
    }
    /// Cross-attention: queries from x (B, Tq, D), keys and values from memory (B, Tk, D).
    Var<T, B> operator()(const Var<T, B>& x, const Var<T, B>& memory, const Tensor<T, B>& mask) const {
        const index_t D = cfg_.dim;
        const Var<T, B> q = linear(x, slice(in_proj_weight, 0, 0, D), slice(in_proj_bias, 0, 0, D));
        const Var<T, B> kv = linear(memory, slice(in_proj_weight, 0, D, 3 * D), slice(in_proj_bias, 0, D, 3 * D));
        return project_out(attention<T, B>({q, 0}, {kv, 0}, {kv, D}, D, options(), mask, rng_));
    }

    // ---- incremental decoding (inference only: call under depthlab::no_grad, eval mode) ----
    /// Self-attention of ONE new position per row over the positions before it, with a
    /// key/value cache. x: (N, 1, D), the input at position t of each of N rows; kv_cache:
    /// (N, capacity, 2D), contiguous, row n holding [K | V] of positions 0..t-1 of that
    /// row. Writes this position's [K | V] at index t, then the query attends over positions
    /// 0..t (no mask needed: every cached position precedes it). Returns (N, 1, D); equals
    /// row t of the full causal self-attention over positions 0..t. No dropout, no gradient.
    /// `resample_from`: the rows resample-ablated heads take their output from.
    Var<T, B> step(const Var<T, B>& x, Tensor<T, B>& kv_cache, index_t t, std::span<const std::int64_t> resample_from = {}) const {
        using P = primitives<B>;
        const index_t D = cfg_.dim;
        const Shape& sx = x.shape();
        const Shape& sc = kv_cache.shape();
        DEPTHLAB_CHECK(!grad_enabled(), usage_error, "MultiHeadAttention::step: incremental decoding is inference only (use depthlab::no_grad)");
        DEPTHLAB_CHECK(sx.rank() == 3 && sx[1] == 1 && sx[2] == D && sc.rank() == 3 && sc[0] == sx[0] && sc[2] == 2 * D &&
                           kv_cache.is_contiguous(),
                       shape_error, "MultiHeadAttention::step: input ", sx, " and cache ", sc, " (expected (N, 1, ", D, ") and a contiguous (N, capacity, ",
                       2 * D, "))");
        DEPTHLAB_CHECK(t >= 0 && t < sc[1], index_error, "MultiHeadAttention::step: position ", t, " outside the cache capacity ", sc[1]);
        const Var<T, B> qkv = linear(x, in_proj_weight, in_proj_bias);  // (N, 1, 3D)
        kv_cache.slice(1, t, t + 1).copy_(qkv.value().slice(2, D, 3 * D));
        // rows decoded, cache capacity, keys attended, heads, head width, row widths of the
        // cache ([K | V]) and of the packed projection ([q | k | v])
        const index_t rows = sx[0], cap = sc[1], Tk = t + 1, heads = cfg_.heads, head_dim = D / heads, cache_width = 2 * D,
                      qkv_width = 3 * D;
        const T alpha = static_cast<T>(1.0 / std::sqrt(static_cast<double>(head_dim)));
        // scores (rows, heads, 1, Tk) = alpha q_h K_h^T, per (row, head), straight out of the cache
        auto probs = Tensor<T, B>::empty({rows, heads, 1, Tk});
        P::gemm(gemm_args{.trans_b = true, .m = 1, .n = Tk, .k = head_dim, .lda = qkv_width, .ldb = cache_width, .ldc = Tk,
                          .batch = heads, .stride_a = head_dim, .stride_b = head_dim, .stride_c = Tk,
                          .batch2 = rows, .stride_a2 = qkv_width, .stride_b2 = cap * cache_width, .stride_c2 = heads * Tk},
                alpha, qkv.value().data(), kv_cache.data(), T(0), probs.data());
        P::softmax_fwd(rows * heads, Tk, probs.data(), T(1), static_cast<const T*>(nullptr), row_broadcast{}, probs.data());
        // out[n, 0, h*head_dim:(h+1)*head_dim] (rows, 1, D) = probs[n, h] V_h
        auto out = Tensor<T, B>::empty({rows, 1, D});
        P::gemm(gemm_args{.m = 1, .n = head_dim, .k = Tk, .lda = Tk, .ldb = cache_width, .ldc = D,
                          .batch = heads, .stride_a = Tk, .stride_b = head_dim, .stride_c = head_dim,
                          .batch2 = rows, .stride_a2 = heads * Tk, .stride_b2 = cap * cache_width, .stride_c2 = D},
                T(1), probs.data(), kv_cache.data() + D, T(0), out.data());
        return project_out(Var<T, B>::constant(std::move(out)), {.first_position = t, .resample_from = resample_from});
    }
    /// [K | V] of a memory (N, Tk, D) for cross-attention: (N, Tk, 2D). Computed once per
    /// source sentence, then used by every step_cross.
    Tensor<T, B> project_memory(const Var<T, B>& memory) const {
        const index_t D = cfg_.dim;
        return linear(memory, slice(in_proj_weight, 0, D, 3 * D), slice(in_proj_bias, 0, D, 3 * D)).value();
    }
    /// Cross-attention of x (N, Tq, D) over a projected memory (project_memory: (N, Tk, 2D));
    /// mask additive, broadcastable to (N, H, Tq, Tk). Same result as operator()(x, memory,
    /// mask) in eval mode. `site`: where x's rows and first position are (ablated heads).
    Var<T, B> step_cross(const Var<T, B>& x, const Tensor<T, B>& memory_kv, const Tensor<T, B>& mask, const ablation_site& site = {}) const {
        const index_t D = cfg_.dim;
        DEPTHLAB_CHECK(memory_kv.rank() == 3 && memory_kv.dim(2) == 2 * D, shape_error, "MultiHeadAttention::step_cross: projected memory ",
                       memory_kv.shape(), " (expected (N, Tk, ", 2 * D, "))");
        const Var<T, B> q = linear(x, slice(in_proj_weight, 0, 0, D), slice(in_proj_bias, 0, 0, D));
        const Var<T, B> kv = Var<T, B>::constant(memory_kv);
        return project_out(attention<T, B>({q, 0}, {kv, 0}, {kv, D}, D, options(), mask, rng_), site);
    }

    [[nodiscard]] const transformer_config& config() const { return cfg_; }
    /// out_proj of the heads' outputs (N, T, D) (or (rows, D)): each head's head_dim columns
    /// first scaled by its gate when head_gate is set, and a switched-off head's replaced as
    /// its ablation kind says (`site`: where the rows are, for the mean and resample kinds).
    Var<T, B> project_out(const Var<T, B>& heads, const ablation_site& site = {}) const {
        if (mean_.recording()) mean_.add(heads.value(), cfg_.dim, "attention heads'");
        Var<T, B> h = head_gate_.defined() ? mul(heads, head_gate_) : heads;
        if (!off_.zeroed.defined()) return (*out_proj)(h);
        h = mul(h, Var<T, B>::constant(off_.zeroed));
        if (off_.mean.defined() || off_.resample.defined())
            DEPTHLAB_CHECK(heads.shape().rank() == 3, shape_error, "MultiHeadAttention: mean- or resample-ablated heads need (N, T, D) head outputs, got ",
                           heads.shape());
        if (off_.mean.defined()) h = h + mul(mean_.at(site.first_position, heads.shape()[1], "attention head"), Var<T, B>::constant(off_.mean));
        if (off_.resample.defined())
            h = h + mul(gather_rows(heads, std::span<const std::int64_t>(resample_rows(site, heads.shape()[0]))), Var<T, B>::constant(off_.resample));
        return (*out_proj)(h);
    }
    /// The analyses' per-head gate ξ, (D,): head h's columns hold ξ_h (a parameter of ones:
    /// Michel et al.'s gradient importance). Undefined by default: no gate and no extra op.
    /// Not a parameter of the model (never saved or trained).
    void set_head_gate(Var<T, B> gate) {
        DEPTHLAB_CHECK(!gate.defined() || gate.shape() == Shape{cfg_.dim}, shape_error, "MultiHeadAttention::set_head_gate: gate ", gate.shape(),
                       ", expected (", cfg_.dim, ")");
        head_gate_ = std::move(gate);
        ++head_version_;
    }
    [[nodiscard]] const Var<T, B>& head_gate() const { return head_gate_; }
    /// Switches head h off (its output replaced as set_head_ablation says; zero by default)
    /// or on again.
    void set_head_off(int h, bool off) {
        check_head(h, "set_head_off");
        head_off_[static_cast<std::size_t>(h)] = off;
        update_head_masks();
    }
    /// What head h outputs while it is switched off.
    void set_head_ablation(int h, ablation_kind kind) {
        check_head(h, "set_head_ablation");
        head_kind_[static_cast<std::size_t>(h)] = kind;
        update_head_masks();
    }
    [[nodiscard]] bool head_on(int h) const {
        check_head(h, "head_on");
        return !head_off_[static_cast<std::size_t>(h)];
    }
    /// Heads switched off now.
    [[nodiscard]] int heads_off() const { return static_cast<int>(std::count(head_off_.begin(), head_off_.end(), true)); }
    /// Counts changes of the head gate, the heads switched off, their kinds and their recorded
    /// mean: a cache of this attention's outputs compares it.
    [[nodiscard]] std::uint64_t head_version() const { return head_version_ + mean_.generation(); }
    /// Whether a head is switched off with the resample kind now (decoding builds the row map
    /// only then).
    [[nodiscard]] bool resamples_heads() const { return off_.resample.defined(); }

    // mean_recording: the heads' outputs (N, T, D) before the output projection, every head
    // on (the mean of a head is its columns)
    void record_mean(bool on) override {
        if (on) mean_.start();
        else mean_.finish(cfg_.dim, "attention heads'");
    }
    void discard_recording() noexcept override { mean_.discard(); }
    [[nodiscard]] bool has_mean() const override { return mean_.defined(); }

    Var<T, B> in_proj_weight, in_proj_bias;
    Linear<T, B>* out_proj;

private:
    void check_head(int h, const char* what) const {
        DEPTHLAB_CHECK(h >= 0 && h < cfg_.heads, index_error, "MultiHeadAttention::", what, ": head ", h, " of ", cfg_.heads);
    }
    // the columns of the switched-off heads, as (D,) masks: `zeroed` 0 on every one of them
    // (1 elsewhere), `mean` and `resample` 1 on those of that kind; undefined when none
    void update_head_masks() {
        ++head_version_;
        off_ = {};
        if (heads_off() == 0) return;
        const index_t D = cfg_.dim, width = D / cfg_.heads;
        std::vector<T> zeroed(static_cast<std::size_t>(D), T(1)), mean(static_cast<std::size_t>(D), T(0)), resample(mean);
        for (index_t c = 0; c < D; ++c) {
            const auto h = static_cast<std::size_t>(c / width);
            if (!head_off_[h]) continue;
            zeroed[static_cast<std::size_t>(c)] = T(0);
            if (head_kind_[h] == ablation_kind::mean) mean[static_cast<std::size_t>(c)] = T(1);
            if (head_kind_[h] == ablation_kind::resample) resample[static_cast<std::size_t>(c)] = T(1);
        }
        const auto mask_of = [D](const std::vector<T>& v) { return std::find(v.begin(), v.end(), T(1)) != v.end() ? Tensor<T, B>::from({D}, v) : Tensor<T, B>(); };
        off_.zeroed = Tensor<T, B>::from({D}, zeroed);
        off_.mean = mask_of(mean);
        off_.resample = mask_of(resample);
    }

    Var<T, B> head_gate_;
    std::vector<bool> head_off_;
    std::vector<ablation_kind> head_kind_;
    struct head_masks {
        Tensor<T, B> zeroed, mean, resample;
    } off_;
    mutable output_mean<T, B> mean_;
    std::uint64_t head_version_ = 0;
    attention_options options() const {
        return {.heads = cfg_.heads, .scale = 0, .dropout = this->is_training() ? cfg_.attention_dropout : 0.0};
    }
    transformer_config cfg_;
    Generator* rng_;
};

/// linear2(dropout(act(linear1(x)))), as in torch.nn.TransformerEncoderLayer.
template <class T, class B = backend::cpu>
class FeedForward : public Module<T, B> {
public:
    FeedForward(const transformer_config& cfg, Generator& gen) : cfg_(cfg), rng_(&gen) {
        linear1 = &this->register_module("linear1", std::make_unique<Linear<T, B>>(cfg.dim, cfg.ff_dim, gen, cfg.init));
        linear2 = &this->register_module("linear2", std::make_unique<Linear<T, B>>(cfg.ff_dim, cfg.dim, gen, cfg.init));
    }
    /// x: (..., D) -> (..., D)
    Var<T, B> operator()(const Var<T, B>& x) const {
        Var<T, B> h = linear_activate(cfg_.act, x, linear1->weight, linear1->bias);
        h = dropout(h, static_cast<T>(cfg_.dropout), *rng_, this->is_training());
        return (*linear2)(h);
    }
    Linear<T, B>* linear1;
    Linear<T, B>* linear2;

private:
    transformer_config cfg_;
    Generator* rng_;
};

// ---- residual sub-layers ----
enum class sublayer_type { self_attention, cross_attention, feed_forward };
inline const char* to_string(sublayer_type t) {
    switch (t) {
        case sublayer_type::self_attention: return "self_attention";
        case sublayer_type::cross_attention: return "cross_attention";
        default: return "feed_forward";
    }
}

/// What the analyses see of a sub-layer, whatever its branch type.
struct residual_base : ablation_target, mean_recording {
    sublayer_type type;
    bool enabled = true;                           // false: the branch is ablated ...
    ablation_kind ablation = ablation_kind::zero;  // ... and outputs this instead
    explicit residual_base(sublayer_type t) : type(t) {}
    void set_ablation(ablation_kind kind) override { ablation = kind; }
    [[nodiscard]] bool is_on() const override { return enabled; }
    [[nodiscard]] mean_recording& means() override { return *this; }
    /// What the sub-layer outputs, as far as a cache of its results must know: switched on
    /// or off, the kind, and which recorded mean (counted up by each record_mean(false)).
    struct output_state {
        bool enabled;
        ablation_kind ablation;
        std::uint64_t mean_generation, branch_version;
        bool operator==(const output_state&) const = default;
    };
    [[nodiscard]] output_state state() const { return {enabled, ablation, mean_generation(), branch_version()}; }
    [[nodiscard]] virtual std::uint64_t mean_generation() const = 0;
    /// What else changes the branch's output without changing its parameters (an attention's
    /// head gates and head ablations: MultiHeadAttention::head_version); 0 for a branch
    /// without such state.
    [[nodiscard]] virtual std::uint64_t branch_version() const = 0;
};

/// post-LN: y = LN(x + Drop(branch(x, ...)));  pre-LN: y = x + Drop(branch(LN(x), ...)).
/// The branch's parameters are named directly under this sub-layer, its norm as ".norm".
template <class Branch, class T, class B = backend::cpu>
class Residual : public Module<T, B>, public residual_base {
public:
    Residual(sublayer_type t, const transformer_config& cfg, Generator& gen)
        : residual_base(t), branch(cfg, gen), norm(cfg.dim, cfg.ln_eps), cfg_(cfg), rng_(&gen) {
        this->register_shared("", branch);
        this->register_shared("norm", norm);
    }
    template <class... Args>
    Var<T, B> operator()(const Var<T, B>& x, Args&&... args) const {
        return wrap(x, [&](const Var<T, B>& h) { return branch(h, std::forward<Args>(args)...); });
    }
    /// The sub-layer around any computation of the branch, f(branch input) -> branch output
    /// (e.g. an incremental attention step with a cache): the same residual, LayerNorm,
    /// dropout and ablation as operator(). A sub-layer ablated to zero or its mean never
    /// calls f.
    template <class F>
    Var<T, B> wrap(const Var<T, B>& x, F&& f, const ablation_site& site = {}) const {
        const T p = static_cast<T>(cfg_.dropout);
        const bool train = this->is_training();
        const auto branch = [&](const Var<T, B>& in) {  // f(in), its mean recorded when asked
            Var<T, B> y = f(in);
            if (mean_.recording()) mean_.add(y.value(), cfg_.dim, to_string(type));
            return y;
        };
        if (cfg_.norm_first) {
            if (!enabled) return ablation == ablation_kind::zero ? x : x + ablated(norm(x), f, site);
            return x + dropout(branch(norm(x)), p, *rng_, train);
        }
        if (!enabled) return ablation == ablation_kind::zero ? norm(x) : norm(x + ablated(x, f, site));
        // post-LN: norm(x + dropout(f(x))) as one op (the same values and masks)
        return residual_layer_norm(x, branch(x), norm.weight, norm.bias, static_cast<T>(norm.eps), p, *rng_, train);
    }
    void record_mean(bool on) override {
        if (on) mean_.start();
        else mean_.finish(cfg_.dim, to_string(type));
    }
    void discard_recording() noexcept override { mean_.discard(); }
    [[nodiscard]] bool has_mean() const override { return mean_.defined(); }
    [[nodiscard]] std::uint64_t mean_generation() const override { return mean_.generation(); }
    [[nodiscard]] std::uint64_t branch_version() const override {
        if constexpr (requires { branch.head_version(); }) return branch.head_version();
        else return 0;
    }

    Branch branch;
    LayerNorm<T, B> norm;

private:
    // the output of an ablated branch for input `in` (N, T, D): its mean at the positions of
    // the site, or its output for the rows the site names
    template <class F>
    Var<T, B> ablated(const Var<T, B>& in, F& f, const ablation_site& site) const {
        const Shape& s = in.shape();
        DEPTHLAB_CHECK(s.rank() == 3, shape_error, "ablation: ", to_string(ablation), "-ablating a ", to_string(type), " sub-layer needs (N, T, D) inputs, got ", s);
        if (ablation == ablation_kind::mean) return mean_.at(site.first_position, s[1], to_string(type));
        return gather_rows(f(in), std::span<const std::int64_t>(resample_rows(site, s[0])));
    }

    transformer_config cfg_;
    Generator* rng_;
    mutable output_mean<T, B> mean_;
};

template <class T, class B = backend::cpu>
class EncoderLayer : public Module<T, B> {
public:
    EncoderLayer(const transformer_config& cfg, Generator& gen)
        : self_attention(sublayer_type::self_attention, cfg, gen), feed_forward(sublayer_type::feed_forward, cfg, gen) {
        this->register_shared("self_attention", self_attention);
        this->register_shared("feed_forward", feed_forward);
    }
    /// x: (B, T, D); mask: additive, broadcastable to (B, H, T, T)
    Var<T, B> operator()(const Var<T, B>& x, const Tensor<T, B>& mask = {}) const { return feed_forward(self_attention(x, mask)); }

    Residual<MultiHeadAttention<T, B>, T, B> self_attention;
    Residual<FeedForward<T, B>, T, B> feed_forward;
};

template <class T, class B = backend::cpu>
class DecoderLayer : public Module<T, B> {
public:
    DecoderLayer(const transformer_config& cfg, Generator& gen)
        : self_attention(sublayer_type::self_attention, cfg, gen),
          cross_attention(sublayer_type::cross_attention, cfg, gen),
          feed_forward(sublayer_type::feed_forward, cfg, gen) {
        this->register_shared("self_attention", self_attention);
        this->register_shared("cross_attention", cross_attention);
        this->register_shared("feed_forward", feed_forward);
    }
    /// x: (B, Tq, D), memory: (B, Tk, D); self_mask (causal [+ padding]), memory_mask (padding)
    Var<T, B> operator()(const Var<T, B>& x, const Var<T, B>& memory, const Tensor<T, B>& self_mask,
                         const Tensor<T, B>& memory_mask = {}) const {
        return feed_forward(cross_attention(self_attention(x, self_mask), memory, memory_mask));
    }
    /// One new position per row (incremental decoding, under no_grad): x (N, 1, D) at
    /// position t; self_kv (N, capacity, 2D) the self-attention cache (position t is
    /// written); memory_kv (N, Tk, 2D) = cross_attention.branch.project_memory(memory);
    /// memory_mask additive, broadcastable to (N, H, 1, Tk). Equals row t of operator().
    /// `resample_from`: the rows a resample-ablated sub-layer takes its output from.
    Var<T, B> step(const Var<T, B>& x, Tensor<T, B>& self_kv, const Tensor<T, B>& memory_kv, const Tensor<T, B>& memory_mask, index_t t,
                   std::span<const std::int64_t> resample_from = {}) const {
        const ablation_site site{.first_position = t, .resample_from = resample_from};
        Var<T, B> h = self_attention.wrap(x, [&](const Var<T, B>& in) { return self_attention.branch.step(in, self_kv, t, resample_from); }, site);
        h = cross_attention.wrap(h, [&](const Var<T, B>& in) { return cross_attention.branch.step_cross(in, memory_kv, memory_mask, site); }, site);
        return feed_forward.wrap(h, [&](const Var<T, B>& in) { return feed_forward.branch(in); }, site);
    }

    Residual<MultiHeadAttention<T, B>, T, B> self_attention;
    Residual<MultiHeadAttention<T, B>, T, B> cross_attention;
    Residual<FeedForward<T, B>, T, B> feed_forward;
};

// ---- stacks ----
/// Depth policies.
struct untied {
    static constexpr bool is_tied = false;
};
struct tied {
    static constexpr bool is_tied = true;
};

/// `depth` layers (untied, named "0", "1", ...) or one layer named "shared" applied
/// `depth` times (tied). forward(iterations, ...) runs any number of iterations of a tied
/// stack; an untied stack runs at most its depth.
template <class Layer, class Tying, class T, class B = backend::cpu>
class Stack : public Module<T, B> {
public:
    Stack(int depth, const transformer_config& cfg, Generator& gen) : depth(depth) {
        DEPTHLAB_CHECK(depth >= 1, usage_error, "Stack: depth ", depth, " < 1");
        if constexpr (Tying::is_tied) {
            layers_.push_back(&this->register_module("shared", std::make_unique<Layer>(cfg, gen)));
        } else {
            for (int i = 0; i < depth; ++i) layers_.push_back(&this->register_module(std::to_string(i), std::make_unique<Layer>(cfg, gen)));
        }
    }
    /// The layer applied at iteration i (the shared one when tied).
    [[nodiscard]] Layer& layer(int i) const {
        DEPTHLAB_CHECK(i >= 0 && (Tying::is_tied || i < depth), index_error, "Stack: layer ", i, " of ", depth);
        return *layers_[Tying::is_tied ? 0 : static_cast<std::size_t>(i)];
    }
    /// Applies `iterations` layers (default: depth) to x, passing the extra arguments on.
    template <class... Args>
    Var<T, B> forward(int iterations, Var<T, B> x, const Args&... args) const {
        if (iterations < 0) iterations = depth;
        DEPTHLAB_CHECK(Tying::is_tied || iterations <= depth, usage_error, "Stack: ", iterations, " iterations on an untied stack of depth ",
                       depth);
        for (int i = 0; i < iterations; ++i) x = layer(i)(x, args...);
        return x;
    }
    int depth;

private:
    std::vector<Layer*> layers_;
};

// ---- addressing sub-layers ----
/// Every residual sub-layer below `m`, with its full name, in model order.
template <class T, class B>
std::vector<std::pair<std::string, residual_base*>> sublayers(Module<T, B>& m) {
    std::vector<std::pair<std::string, residual_base*>> out;
    m.visit([&](const std::string& name, Module<T, B>& mod) {
        if (auto* r = dynamic_cast<residual_base*>(&mod)) out.emplace_back(name, r);
    });
    return out;
}

/// Parameters whose names lie under a module name (exactly `prefix.` + ...).
template <class T, class B>
std::vector<named_parameter<T, B>> parameters_under(const Module<T, B>& m, const std::string& prefix) {
    std::vector<named_parameter<T, B>> out;
    for (auto& np : m.named_parameters())
        if (is_under(np.first, prefix)) out.push_back(np);
    return out;
}

}  // namespace depthlab::nn
