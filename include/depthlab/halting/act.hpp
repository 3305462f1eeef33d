#pragma once
// Per-token adaptive depth over a tied transformer layer (ACT), as in ../shared/papers.md §A
// (Simoulin & Crabbé 2021, following the official code):
//
//   y^n   = layer(s^{n-1})                            the whole layer, all positions
//   p^n   = sigmoid(w_h · y^n + b_h)                  from the layer OUTPUT; b_h = 0 at init
//   running  = cum < 1                                padding starts with cum = 1: never runs
//   new_halt = (cum + p·running >  1 − ε)·running     strict '>'
//   running  = (cum + p·running <= 1 − ε)·running
//   cum += p·running;  R += new_halt·(1 − cum);  cum += new_halt·R
//   N += running + new_halt;   w = p·running + new_halt·R
//   s^n = w·y^n + (1 − w)·s^{n−1}                     running interpolation
//   loop while any token runs and n < N_max           no forced halt: such a token keeps R = 0
//
// Ponder cost per sequence P = Σ_t mask_t (N_t + R_t); N is a constant for the gradient, only R
// carries gradient to the halting unit.
//
// Two implementations of the same policy:
//  * dense (the reference and test oracle): every position goes through the layer every
//    iteration; halted tokens get w = 0.
//  * compact (policy `act` only): a halted token's state is frozen and, with tied weights, so
//    are its key and value projections; each iteration computes keys/values only for the
//    tokens whose state changed in the previous iteration, and queries, attention, output
//    projection, feed-forward and halting unit only for the running tokens. Exact, and its
//    cost falls with the number of running tokens. Its halting decisions run on the device
//    (act_decide); on a device the host learns the running set only act_options::host_reads
//    times per forward, so between reads tokens halted since are computed with weight 0.
//
// Policies (compile-time): fixed (N_max iterations, no halting unit use), act (the paper),
// act_graves (Graves 2016 mean-field output s = Σ_n w^n y^n, the state passed on is y^n;
// halting bias initialised to 1), act_ut (Universal-Transformer style: halted tokens keep
// being transformed, s = y^n for them), pondernet (Banino et al. 2021, below).
//
// PonderNet: λ^n = sigmoid(w_h · y^n + b_h) is the probability of halting at iteration n
// given no halt before, p^n = λ^n Π_{j<n} (1 − λ^j); the last iteration run takes the
// remaining mass (λ = 1 there), so p sums to 1 for every token. Iterations run until every
// token has halted with probability ≥ 1 − ε, or N_max. The state passed on is y^n (no
// interpolation). Training uses the expected task loss Σ_n p^n L(y^n) (the model's job:
// ActAlbert::losses) plus β · KL(p ‖ geometric(λ_p) truncated to the iterations run); the
// `ponder` output is that KL averaged over real tokens. At evaluation a token's output is
// y^{N_t} with N_t its median halting step (the first n with Σ_{j≤n} p^j ≥ 0.5): the record
// holds N_t, and R_t = p^{N_t}.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <span>
#include <type_traits>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "depthlab/backend/elementwise.hpp"
#include "depthlab/nn/transformer.hpp"

namespace depthlab::halting {

struct fixed {
    static constexpr const char* name = "fixed";
};
struct act {
    static constexpr const char* name = "act";
};
struct act_graves {
    static constexpr const char* name = "act_graves";
};
struct act_ut {
    static constexpr const char* name = "act_ut";
};
struct pondernet {
    static constexpr const char* name = "pondernet";
};

struct act_options {
    int max_iterations = 6;      // N_max
    double epsilon = 0.01;       // halting threshold 1 − ε
    int min_iterations = 0;      // remedy against collapse: no token halts before this iteration
    // policy act: run only the running tokens (exact: the same values and gradients as the
    // dense path). It applies to post-LN layers with every sub-layer switched on and, in
    // training mode, no dropout; otherwise the dense path runs (halting_record::compact
    // says which ran), so dropout, ablation and pre-LN work with the default options.
    bool compact = true;
    // fixed-point trace, cos(s^{n−1}, s^n) for running tokens: an analysis, so by default only
    // in eval mode (a training step has no use for it and it costs a pass over the states)
    enum class trace { never, eval_only, always } fixed_point_trace = trace::eval_only;
    double lambda_p = 0.2;       // PonderNet: the geometric prior's halting probability per step
    // remedy against collapse (every token halting after one iteration): the initial bias b
    // of the halting unit p = sigmoid(w·y + b); negative: more iterations at first. NaN: the
    // policy's (0 as the paper, 1 for act_graves)
    double halting_bias = std::numeric_limits<double>::quiet_NaN();
    // compact path: each iteration's row set is padded with tokens that do not run (halted
    // ones, or padding positions; their w is 0, so their states stay as they are and nothing
    // about them changes: exact, as the dense path computing every token) up to a multiple of
    // row_quantum rows. The GEMMs then meet 1/row_quantum of the row counts, so far fewer
    // primitives are compiled: with exact counts (1) an hour of ACT-ALBERT compiled 183 185
    // (89 s) in a cache of 4096, and a resumed minute ~3 700 where 16 makes 890 (docs/performance.md, "GEMM
    // shapes of the compact path"). The padding costs < row_quantum rows per iteration.
    int row_quantum = 16;
    // compact path on a device: the halting decisions are taken on the device, and the host
    // reads which tokens still run (one synchronisation each) host_reads times per forward,
    // spread evenly over the N_max iterations (after iterations ⌈i·N_max/(host_reads + 1)⌉);
    // until the next read the rows are the last read's running set, tokens halted since among
    // them with weight 0 (exact, as padding rows, but computed). The iterations after the last
    // read run to N_max unless it found no token running. −1: a read after every iteration
    // (the fewest rows; a synchronisation per iteration). A forward then synchronises
    // host_reads + 1 times (the last for the record). The CPU, whose memory is the host's, and a
    // traced forward (fixed_point_trace) read after every iteration whatever this says.
    int host_reads = 1;

    /// usage_error naming the first field outside its range, and the range.
    void validate() const {
        DEPTHLAB_CHECK(max_iterations >= 1, usage_error, "act_options: max_iterations (N_max) ", max_iterations, " must be >= 1");
        DEPTHLAB_CHECK(epsilon > 0 && epsilon < 1, usage_error, "act_options: epsilon ", epsilon, " must lie in (0, 1) (the threshold is 1 - epsilon)");
        DEPTHLAB_CHECK(min_iterations >= 0 && min_iterations <= max_iterations, usage_error, "act_options: min_iterations ", min_iterations,
                       " must lie in [0, max_iterations = ", max_iterations, "]");
        DEPTHLAB_CHECK(lambda_p > 0 && lambda_p < 1, usage_error, "act_options: lambda_p ", lambda_p, " must lie in (0, 1)");
        DEPTHLAB_CHECK(!std::isinf(halting_bias), usage_error, "act_options: halting_bias ", halting_bias,
                       " must be finite (or NaN, which means the policy's)");
        DEPTHLAB_CHECK(row_quantum >= 1, usage_error, "act_options: row_quantum ", row_quantum, " must be >= 1");
        DEPTHLAB_CHECK(host_reads >= -1, usage_error, "act_options: host_reads ", host_reads, " must be >= 0, or -1 (after every iteration)");
    }
};
/// The names of the trace settings, in the enum's order (configs store them: io/config.hpp).
inline constexpr const char* act_trace_names[] = {"never", "eval_only", "always"};
constexpr std::span<const char* const> enum_names(act_options::trace) { return act_trace_names; }
/// act_options' fields by name (io::save_config / load_config).
template <class C, class F>
    requires std::same_as<std::remove_const_t<C>, act_options>
void config_fields(C& c, F&& f) {
    f("max_iterations", c.max_iterations);
    f("epsilon", c.epsilon);
    f("min_iterations", c.min_iterations);
    f("compact", c.compact);
    f("fixed_point_trace", c.fixed_point_trace);
    f("lambda_p", c.lambda_p);
    f("halting_bias", c.halting_bias);
    // (row_quantum and host_reads are not saved: execution choices of the compact path, exact either way)
}

/// The ponder-cost weight at a step: tau ramped up linearly from 0 over warmup_steps (the
/// other remedy against collapse: the task loss shapes the states before the ponder cost
/// pushes every token to halt early); tau itself from then on, or always when warmup_steps <= 0.
inline double ponder_weight(double tau, std::int64_t warmup_steps, std::int64_t step) {
    DEPTHLAB_CHECK(std::isfinite(tau) && tau >= 0, usage_error, "ponder_weight: tau ", tau,
                   " must be a finite number >= 0 (a negative weight rewards pondering)");
    if (warmup_steps <= 0) return tau;
    return tau * std::min(1.0, static_cast<double>(step) / static_cast<double>(warmup_steps));
}

/// What happened to every token (flat index b*T + t).
struct halting_record {
    index_t batch = 0, length = 0;
    int iterations = 0;                  // iterations run (max over tokens)
    std::vector<int> N;                  // iterations per token (0 for padding)
    std::vector<double> R;               // remainders
    std::vector<std::vector<double>> cosine;  // [iteration][token]: cos(s^{n-1}, s^n), NaN when not running
    std::vector<index_t> running_per_iteration;
    bool compact = false;                // the compact path ran (act_options::compact)
    std::int64_t flops = 0;              // the forward's matrix-product FLOPs that ran (flop_scope): the iterations' rows
    /// flops per real token (N > 0); 0 for an empty record.
    [[nodiscard]] double flops_per_token() const {
        const auto real = std::count_if(N.begin(), N.end(), [](int n) { return n > 0; });
        return real > 0 ? static_cast<double>(flops) / static_cast<double>(real) : 0.0;
    }
};

template <class T, class B = backend::cpu>
struct act_result {
    Var<T, B> hidden;   // (B, T, H)
    Var<T, B> ponder;   // scalar: mean over the batch of Σ_t mask (N_t + R_t) — gradient through R only
                        // (PonderNet: the KL to the prior, mean over real tokens)
    halting_record record;
    std::vector<Var<T, B>> states;     // PonderNet: y^n of every iteration run, each (B, T, H)
    std::vector<Var<T, B>> halt_prob;  // PonderNet: p^n of every iteration run, each (B*T); Σ_n p^n = 1
};

/// The paper's halting arithmetic on the host, token by token (in the model's precision, so
/// that both implementations take the same decisions). Kept separate so that it can be
/// tested on hand-computed cases.
template <class T>
struct act_state {
    std::vector<T> cum, R;
    std::vector<int> N;
    std::vector<char> running;
    T threshold;      // 1 − ε
    int min_iterations;

    /// n tokens; mask[i] = 0 marks padding (starts halted, cum = 1).
    act_state(const std::vector<char>& mask, double epsilon, int min_iter = 0)
        : cum(mask.size()), R(mask.size(), T(0)), N(mask.size(), 0), running(mask), threshold(static_cast<T>(1.0 - epsilon)),
          min_iterations(min_iter) {
        for (std::size_t i = 0; i < mask.size(); ++i) cum[i] = mask[i] ? T(0) : T(1);
    }
    struct masks {
        std::vector<T> running_after, new_halt;
        index_t still_running = 0;
    };
    /// Iteration n (1-based) with halting probabilities p for the tokens in `rows`
    /// (p[j] belongs to token rows[j]); returns the masks over `rows`.
    masks step(const std::vector<T>& p, const std::vector<std::int64_t>& rows, int n) {
        masks m;
        m.running_after.assign(rows.size(), T(0));
        m.new_halt.assign(rows.size(), T(0));
        for (std::size_t j = 0; j < rows.size(); ++j) {
            const auto i = static_cast<std::size_t>(rows[j]);
            if (!running[i]) continue;
            // (a NaN would compare false and leave the token running on NaN states; the
            // probabilities are on the host already, so this check costs no read)
            DEPTHLAB_CHECK(std::isfinite(p[j]), numeric_error, "ACT: iteration ", n, ": the halting probability of token ", i, " is ", p[j],
                           ": the input or the state holds a non-finite value");
            const bool halt = cum[i] + p[j] > threshold && n >= min_iterations;  // strict '>'
            if (halt) {
                m.new_halt[j] = T(1);
                R[i] += T(1) - cum[i];
                cum[i] += R[i];
                running[i] = 0;
            } else {
                m.running_after[j] = T(1);
                cum[i] += p[j];
                ++m.still_running;
            }
            N[i] += 1;
        }
        return m;
    }
    [[nodiscard]] bool any_running() const {
        for (char r : running)
            if (r) return true;
        return false;
    }
};

/// act_halting_step's three results, each (n).
template <class T, class B>
struct halting_step_result {
    Var<T, B> w, cum, R;
};

/// One differentiable halting step over n tokens, the paper's arithmetic (elementwise::act_halting):
/// p the halting probabilities, cum and R the cumulative probabilities and remainders, and the
/// 0/1 masks running_after and new_halt that act_state::step decided (never both 1 for a token),
/// all (n). Returns the interpolation weights w = p·ra + nh·(1 − cum − p·ra), and cum and R
/// after the step. One launch computes the three; each has one launch backward: they are affine
/// in p, cum and R with coefficients 0 and ±1 chosen by the masks.
template <class T, class B>
halting_step_result<T, B> act_halting_step(const Var<T, B>& p, const Var<T, B>& cum, const Var<T, B>& R, const Tensor<T, B>& running_after,
                                           const Tensor<T, B>& new_halt) {
    using P = primitives<B>;
    using coefficient = elementwise::halting_coefficient<T>;
    const Shape& s = p.shape();
    DEPTHLAB_CHECK(s.rank() == 1 && cum.shape() == s && R.shape() == s && running_after.shape() == s && new_halt.shape() == s, shape_error,
                   "act_halting_step: p ", s, ", cum ", cum.shape(), ", R ", R.shape(), " and masks ", running_after.shape(), ", ",
                   new_halt.shape(), " (expected five (n) vectors)");
    const index_t n = s[0];
    const Tensor<T, B> pv = p.value().contiguous(), cv = cum.value().contiguous(), rv = R.value().contiguous();
    const Tensor<T, B> ra = running_after.contiguous(), nh = new_halt.contiguous();
    auto w = Tensor<T, B>::empty(s), cum_after = Tensor<T, B>::empty(s), r_after = Tensor<T, B>::empty(s);
    P::act_halting_fwd(n, pv.data(), cv.data(), rv.data(), ra.data(), nh.data(), w.data(), cum_after.data(), r_after.data());
    // a result of inputs a and b, with d(result)/da = ca(ra, nh) and d(result)/db = cb(ra, nh)
    const auto result = [&](Tensor<T, B> value, const Var<T, B>& a, coefficient ca, const Var<T, B>& b, coefficient cb) {
        return detail::make_result<T, B>(op_kind::act_halting, std::move(value), {a, b}, [=](Node<T, B>& nd) {
            const auto ga = detail::parent_grad_out(nd, 0);
            const auto gb = detail::parent_grad_out(nd, 1);
            P::act_halting_bwd(n, ra.data(), nh.data(), nd.grad.data(), ca, ga.data, ga.beta, cb, gb.data, gb.beta);
        });
    };
    return {result(std::move(w), p, {.run = T(1)}, cum, {.halt = T(-1)}),                  // w = p·ra + nh·(1 − cum)
            result(std::move(cum_after), p, {.run = T(1)}, cum, {.halt = T(-1), .one = T(1)}),  // cum + p·ra + nh·(1 − cum)
            result(std::move(r_after), cum, {.halt = T(-1)}, R, {.one = T(1)})};           // R + nh·(1 − cum)
}

/// A tied encoder layer iterated with per-token halting.
template <class T, class B = backend::cpu, class Policy = act>
class ActEncoder : public nn::Module<T, B> {
public:
    ActEncoder(const nn::transformer_config& cfg, Generator& gen, act_options opt = {});

    /// x: (B, T, H) embeddings; lengths: real tokens per sequence.
    act_result<T, B> operator()(const Var<T, B>& x, const std::vector<index_t>& lengths) const;

    act_options opt;
    nn::EncoderLayer<T, B>* layer;
    nn::Linear<T, B>* halting_unit;

private:
    using V = Var<T, B>;
    using Tn = Tensor<T, B>;

    static V constant(const std::vector<T>& v) { return V::constant(Tn::from({static_cast<index_t>(v.size())}, v)); }
    /// The differentiable part of one halting step over m tokens, its masks decided (act_decide):
    /// returns w and updates cum and R (Vars of length m).
    static V halting_step(const V& p, V& cum, V& R, const Tn& running_after, const Tn& new_halt) {
        halting_step_result<T, B> r = act_halting_step(p, cum, R, running_after, new_halt);
        cum = std::move(r.cum);
        R = std::move(r.R);
        return r.w;  // w = p·running + new_halt·R
    }
    /// Padding mask over flat tokens and the initial record.
    static std::vector<char> token_mask(const std::vector<index_t>& lengths, index_t Tt) {
        std::vector<char> m(lengths.size() * static_cast<std::size_t>(Tt), 0);
        for (std::size_t b = 0; b < lengths.size(); ++b)
            for (index_t t = 0; t < lengths[b]; ++t) m[b * Tt + t] = 1;
        return m;
    }
    static std::vector<T> initial_cum(const std::vector<char>& mask) {
        std::vector<T> c(mask.size());
        for (std::size_t i = 0; i < mask.size(); ++i) c[i] = mask[i] ? T(0) : T(1);
        return c;
    }
    void finish_record(halting_record& rec, const act_state<T>& st) const {
        rec.N = st.N;
        rec.R.assign(st.R.begin(), st.R.end());
    }
    /// ponder = mean_b Σ_t mask (N + R): N enters as a constant, R with its gradient.
    static V ponder_cost(const V& R, const halting_record& rec) {
        double n_sum = 0;
        for (int v : rec.N) n_sum += v;
        const T inv_b = T(1) / static_cast<T>(std::max<index_t>(rec.batch, 1));
        return add(scale(sum(R), inv_b), V::constant(Tn::full(Shape{}, static_cast<T>(n_sum) * inv_b)));
    }
    [[nodiscard]] bool tracing() const {
        return opt.fixed_point_trace == act_options::trace::always ||
               (opt.fixed_point_trace == act_options::trace::eval_only && !this->is_training());
    }
    /// Records cos(before_j, after_j) for token rows[j]; before/after produce (rows, H) tensors
    /// and are only evaluated when tracing.
    template <class Before, class After>
    void record_cosine(halting_record& rec, Before&& before_fn, After&& after_fn, const std::vector<std::int64_t>& rows) const {
        if (!tracing()) return;
        const Tn before_t = before_fn(), after_t = after_fn();
        const index_t H = before_t.shape().back();
        // the trace is read on the host (an explicit copy: tracing is for analysis runs)
        const std::vector<T> before = before_t.to_host(), after = after_t.to_host();
        std::vector<double> cos(static_cast<std::size_t>(rec.batch * rec.length), std::numeric_limits<double>::quiet_NaN());
        parallel_for(static_cast<index_t>(rows.size()), 64, [&](index_t j0, index_t j1) {
            for (index_t j = j0; j < j1; ++j) {
                const T* x = before.data() + j * H;
                const T* y = after.data() + j * H;
                double xy = 0, xx = 0, yy = 0;
                for (index_t c = 0; c < H; ++c) {
                    xy += double(x[c]) * y[c];
                    xx += double(x[c]) * x[c];
                    yy += double(y[c]) * y[c];
                }
                cos[static_cast<std::size_t>(rows[j])] = xy / std::sqrt(std::max(xx * yy, 1e-300));
            }
        });
        rec.cosine.push_back(std::move(cos));
    }
    /// Whether the host reads which tokens still run after iteration n (act_options::host_reads):
    /// after every iteration on the CPU (its memory is the host's), when tracing (the trace is
    /// read anyway), for act_ut (its halted tokens' rows are chosen on the host) and with −1.
    [[nodiscard]] bool reads_after(int n) const {
        if (B::host_accessible || tracing() || opt.host_reads < 0 || std::is_same_v<Policy, act_ut>) return true;
        for (int i = 1; i <= opt.host_reads; ++i)
            if (n == (i * opt.max_iterations + opt.host_reads) / (opt.host_reads + 1)) return true;
        return false;
    }
    /// 1 where `runs(rows[j])`, else 0: which of `rows` still run, as the device's 0/1 mask (an
    /// upload, not a launch: the host knows it where it chose the rows).
    template <class Runs>
    static Tn flags(const std::vector<std::int64_t>& rows, Runs&& runs) {
        std::vector<T> a(rows.size());
        for (std::size_t j = 0; j < rows.size(); ++j) a[j] = runs(rows[j]) ? T(1) : T(0);
        return Tn::from({static_cast<index_t>(rows.size())}, a);
    }
    static std::vector<std::int64_t> running_rows(const act_state<T>& st) {
        std::vector<std::int64_t> rows;
        for (std::size_t i = 0; i < st.running.size(); ++i)
            if (st.running[i]) rows.push_back(static_cast<std::int64_t>(i));
        return rows;
    }

    /// What both paths start from: sizes, the token mask, the host arithmetic, the record,
    /// the flat states, and the differentiable cum and R (padding starts with cum = 1).
    struct run_state {
        index_t Bn, Tt, H, N;
        std::vector<char> tokens;
        act_state<T> st;
        halting_record rec;
        V s, cum, R;
    };
    run_state start(const V& x, const std::vector<index_t>& lengths) const {
        const index_t Bn = x.shape()[0], Tt = x.shape()[1], H = x.shape()[2], N = Bn * Tt;
        std::vector<char> tokens = token_mask(lengths, Tt);
        act_state<T> st(tokens, opt.epsilon, opt.min_iterations);
        V cum = constant(initial_cum(tokens));
        return {Bn, Tt, H, N, std::move(tokens), std::move(st), halting_record{Bn, Tt, 0, {}, {}, {}, {}}, reshape(x, {N, H}),
                std::move(cum), V::constant(Tn::zeros({N}))};
    }

    // ---- dense masked reference: any policy ----
    act_result<T, B> dense_forward(const V& x, const std::vector<index_t>& lengths) const {
        run_state r = start(x, lengths);
        // (named references, not a structured binding: clang 14 cannot capture those in lambdas)
        const index_t Bn = r.Bn, Tt = r.Tt, H = r.H, N = r.N;
        auto& tokens = r.tokens;
        auto& st = r.st;
        auto& rec = r.rec;
        V &s = r.s, &cum = r.cum, &R = r.R;
        const Tn mask = nn::padding_mask<T, B>(lengths, Tt);
        if constexpr (std::is_same_v<Policy, fixed>) {
            // every real token runs N_max iterations: nothing to decide, nothing to read
            const std::vector<std::int64_t> rows = running_rows(st);
            for (int n = 1; n <= opt.max_iterations; ++n) {
                rec.running_per_iteration.push_back(static_cast<index_t>(rows.size()));
                rec.iterations = n;
                const V y = reshape((*layer)(reshape(s, {Bn, Tt, H}), mask), {N, H});
                record_cosine(rec, [&] { return gather_rows(s, rows).value(); }, [&] { return gather_rows(y, rows).value(); }, rows);
                for (std::int64_t i : rows) st.N[static_cast<std::size_t>(i)] += 1;
                s = y;
            }
            finish_record(rec, st);
            return {reshape(s, {Bn, Tt, H}), V::constant(Tn::zeros(Shape{})), std::move(rec), {}, {}};
        } else {
            // the halting decisions on the device (act_decide), as in the compact path; the host
            // reads which tokens run only where reads_after says (to stop early, and for the
            // trace), and the record once at the end
            std::vector<std::int64_t> all(static_cast<std::size_t>(N)), rows = running_rows(st);
            for (index_t i = 0; i < N; ++i) all[i] = i;
            Tn active = flags(all, [&](std::int64_t i) { return tokens[static_cast<std::size_t>(i)] != 0; }), state = Tn::zeros({N, 2});
            const T threshold = static_cast<T>(1.0 - opt.epsilon);
            V out;  // Graves: the mean-field sum
            for (int n = 1; n <= opt.max_iterations; ++n) {
                if (n > 1 && reads_after(n - 1)) {
                    const std::vector<T> running_now = active.to_vector();  // the read: a synchronisation
                    rows.clear();
                    for (index_t i = 0; i < N; ++i)
                        if (running_now[i] > T(0)) rows.push_back(i);
                    if (rows.empty()) break;
                }
                const V y = reshape((*layer)(reshape(s, {Bn, Tt, H}), mask), {N, H});
                const V p = reshape(sigmoid((*halting_unit)(y)), {N});
                Tn ra = Tn::empty({N}), nh = Tn::empty({N});
                const Tn pv = p.value().contiguous(), cv = cum.value().contiguous();
                primitives<B>::act_decide(N, pv.data(), cv.data(), active.data(), threshold, n, opt.min_iterations, ra.data(), nh.data(),
                                          state.data());
                const V w = halting_step(p, cum, R, ra, nh);
                V s_next;
                if constexpr (std::is_same_v<Policy, act_graves>) {
                    s_next = y;  // the state passed on is the layer output
                    const V contrib = scale_rows(y, w);
                    accumulate(out, contrib);
                } else {
                    s_next = interpolate_rows(s, y, w);  // w·y + (1 − w)·s
                    if constexpr (std::is_same_v<Policy, act_ut>) {
                        // tokens halted before this iteration keep being transformed (reads_after
                        // reads after every iteration under this policy: rows are this iteration's)
                        std::vector<std::int64_t> halted;
                        std::vector<char> was_running(static_cast<std::size_t>(N), 0);
                        for (std::int64_t i : rows) was_running[static_cast<std::size_t>(i)] = 1;
                        for (index_t i = 0; i < N; ++i)
                            if (tokens[i] && !was_running[i]) halted.push_back(i);
                        if (!halted.empty()) s_next = row_update(s_next, halted, gather_rows(y, halted));
                    }
                }
                // (tracing reads after every iteration: rows are this iteration's running tokens)
                record_cosine(rec, [&] { return gather_rows(s, rows).value(); }, [&] { return gather_rows(s_next, rows).value(); }, rows);
                s = s_next;
                active = ra;
            }
            if constexpr (std::is_same_v<Policy, act_graves>) {
                if (out.defined()) s = out;  // tokens that never halted keep weights summing below 1, as in Graves
            }
            read_record(rec, all, {state}, R.value());
            return {reshape(s, {Bn, Tt, H}), ponder_cost(R, rec), std::move(rec), {}, {}};
        }
    }

    // ---- PonderNet: a halting distribution over iterations ----
    act_result<T, B> pondernet_forward(const V& x, const std::vector<index_t>& lengths) const {
        run_state r = start(x, lengths);
        const index_t Bn = r.Bn, Tt = r.Tt, H = r.H, N = r.N;
        auto& tokens = r.tokens;
        auto& rec = r.rec;
        V& s = r.s;
        const Tn mask = nn::padding_mask<T, B>(lengths, Tt);
        act_result<T, B> out;
        std::vector<T> real(static_cast<std::size_t>(N));
        index_t n_real = 0;
        for (index_t i = 0; i < N; ++i) {
            real[i] = tokens[i] ? T(1) : T(0);
            n_real += tokens[i] ? 1 : 0;
        }
        std::vector<double> cdf(static_cast<std::size_t>(N), 0.0);
        std::vector<int> median(static_cast<std::size_t>(N), 0);
        std::vector<double> p_median(static_cast<std::size_t>(N), 0.0);
        const V real_mask = constant(real);
        V unhalted = real_mask;                               // Π_{j<n} (1 − λ^j)
        V log_unhalted = V::constant(Tn::zeros({N}));         // its log, kept exactly via log_sigmoid
        V p_log_p, p_log_q;                                   // Σ_n p log p and Σ_n p log q̃ (q̃ unnormalised)
        V hidden;
        const double log_lp = std::log(opt.lambda_p), log_1mlp = std::log1p(-opt.lambda_p);
        int n = 1;
        for (;; ++n) {
            std::vector<std::int64_t> rows;  // real tokens not yet past their median step
            for (index_t i = 0; i < N; ++i)
                if (tokens[i] && median[i] == 0) rows.push_back(i);
            rec.running_per_iteration.push_back(static_cast<index_t>(rows.size()));
            rec.iterations = n;
            const V y = reshape((*layer)(reshape(s, {Bn, Tt, H}), mask), {N, H});
            const V z = reshape((*halting_unit)(y), {N});
            // the last iteration takes the remaining mass: at N_max, or once every token has
            // halted with probability >= 1 − ε
            const std::vector<T> zv = z.value().to_vector(), uv = unhalted.value().to_vector();
            double left = 0;
            for (index_t i = 0; i < N; ++i)
                if (tokens[i]) left = std::max(left, double(uv[i]) / (1.0 + std::exp(double(zv[i]))));  // u·(1 − λ)
            const bool last = n >= opt.max_iterations || left < opt.epsilon;
            V p, log_p;
            if (last) {
                p = unhalted;
                log_p = log_unhalted;
            } else {
                p = mul(unhalted, sigmoid(z));
                log_p = add(log_unhalted, log_sigmoid(z));
                const V nz = scale(z, T(-1));
                unhalted = mul(unhalted, sigmoid(nz));
                log_unhalted = add(log_unhalted, log_sigmoid(nz));
            }
            const std::vector<T> pv = p.value().to_vector();
            for (std::int64_t i : rows) {
                cdf[i] += pv[i];
                if (cdf[i] >= 0.5 || last) {
                    median[i] = n;
                    p_median[i] = pv[i];
                }
            }
            hidden = n == 1 ? y : row_update(hidden, rows, gather_rows(y, rows));
            record_cosine(rec, [&] { return gather_rows(s, rows).value(); }, [&] { return gather_rows(y, rows).value(); }, rows);
            const V plp = mul(p, log_p), plq = scale(p, static_cast<T>(log_lp + (n - 1) * log_1mlp));
            accumulate(p_log_p, plp);
            accumulate(p_log_q, plq);
            out.states.push_back(reshape(y, {Bn, Tt, H}));
            out.halt_prob.push_back(p);
            s = y;
            if (last) break;
        }
        // KL(p ‖ q) with q^n = λ_p (1 − λ_p)^{n−1} / Z over the n iterations run,
        // Z = 1 − (1 − λ_p)^n; Σ_n p^n = 1, so log Z enters once per token
        const T log_z = static_cast<T>(std::log1p(-std::exp(n * log_1mlp)));
        const V kl = add(add(p_log_p, scale(p_log_q, T(-1))), V::constant(Tn::full({N}, log_z)));
        out.ponder = scale(sum(mul(kl, real_mask)), T(1) / static_cast<T>(std::max<index_t>(n_real, 1)));
        rec.N = median;
        rec.R = p_median;
        out.hidden = reshape(hidden, {Bn, Tt, H});
        out.record = std::move(rec);
        return out;
    }

    // ---- compact path: policy act, exact ----
    act_result<T, B> compact_forward(const V& x, const std::vector<index_t>& lengths) const {
        run_state r = start(x, lengths);
        // (named references, not a structured binding: clang 14 cannot capture those in lambdas)
        const index_t Bn = r.Bn, Tt = r.Tt, H = r.H, N = r.N;
        const auto& tokens = r.tokens;
        auto& rec = r.rec;
        V &s = r.s, &cum = r.cum, &R = r.R;
        const auto& attn = layer->self_attention.branch;
        // keys and values of every position from the initial states; afterwards only the rows
        // computed in the previous iteration are recomputed (tied weights)
        const V w_q = slice(attn.in_proj_weight, 0, 0, H), b_q = slice(attn.in_proj_bias, 0, 0, H);
        const V w_kv = slice(attn.in_proj_weight, 0, H, 3 * H), b_kv = slice(attn.in_proj_bias, 0, H, 3 * H);
        V KV = linear(s, w_kv, b_kv);  // (N, 2H)
        // The rows an iteration computes, idx (host, sorted: grouped by sequence): the running
        // tokens as of the last read, padded with tokens that do not run to a multiple of
        // opt.row_quantum. Over them, on the device: states, cum and R, whether each token still
        // runs (active, 0/1) and its record so far (state: iterations run, first iteration with a
        // NaN probability). The running set only shrinks, so a read gathers the next rows from
        // the current ones; a token's final state, R and record are kept once, at the first read
        // that finds it stopped (or at the end).
        std::vector<std::int64_t> idx = padded_rows(running_rows(r.st), nullptr, Bn, Tt);
        // (a gather of every row, or an update of every row, is a copy for nothing: while all
        // tokens run, as in the first iterations, the rows are taken as they are)
        const bool every_row = static_cast<index_t>(idx.size()) == N;
        V s_run = every_row ? s : gather_rows(s, idx), cum_run = every_row ? cum : gather_rows(cum, idx), r_run = every_row ? R : gather_rows(R, idx);
        Tn active = flags(idx, [&](std::int64_t i) { return tokens[static_cast<std::size_t>(i)] != 0; });
        Tn state = Tn::zeros({static_cast<index_t>(idx.size()), 2});
        std::vector<char> kept(static_cast<std::size_t>(N), 0);
        std::vector<std::int64_t> done_rows;
        std::vector<V> s_done, r_done;
        std::vector<Tn> state_done;
        const auto keep = [&](const std::vector<std::int64_t>& pos) {  // positions within idx
            if (pos.empty()) return;
            for (std::int64_t j : pos) {
                kept[static_cast<std::size_t>(idx[j])] = 1;
                done_rows.push_back(idx[j]);
            }
            const bool whole = pos.size() == idx.size();
            s_done.push_back(whole ? s_run : gather_rows(s_run, pos));
            r_done.push_back(whole ? r_run : gather_rows(r_run, pos));
            state_done.push_back(whole ? state : gather_rows(V::constant(state), pos).value());
        };
        const T threshold = static_cast<T>(1.0 - opt.epsilon);
        for (int n = 1; n <= opt.max_iterations; ++n) {
            if (n > 1) {
                std::vector<std::int64_t> next = idx, running;
                if (reads_after(n - 1)) {
                    const std::vector<T> running_now = active.to_vector();  // the read: a synchronisation
                    std::vector<std::int64_t> stopped;
                    for (std::size_t j = 0; j < idx.size(); ++j) {
                        const auto i = static_cast<std::size_t>(idx[j]);
                        if (running_now[j] > T(0)) running.push_back(idx[j]);
                        else if (tokens[i] && !kept[i]) stopped.push_back(static_cast<std::int64_t>(j));
                    }
                    keep(stopped);
                    if (running.empty()) break;
                    next = padded_rows(running, &idx, Bn, Tt);
                }
                const V kv_prev = linear(s_run, w_kv, b_kv);
                KV = static_cast<index_t>(idx.size()) == N ? kv_prev : row_update(KV, idx, kv_prev);
                if (next.size() != idx.size()) {  // (next ⊆ idx)
                    const std::vector<std::int64_t> pos = positions_within(idx, next);
                    s_run = gather_rows(s_run, pos);
                    cum_run = gather_rows(cum_run, pos);
                    r_run = gather_rows(r_run, pos);
                    state = gather_rows(V::constant(state), pos).value();
                    idx = std::move(next);
                    active = flags(idx, [&](std::int64_t i) { return std::binary_search(running.begin(), running.end(), i); });
                }
            }
            const index_t nr = static_cast<index_t>(idx.size());
            std::vector<index_t> q_off(static_cast<std::size_t>(Bn + 1), 0);
            for (std::int64_t i : idx) ++q_off[static_cast<std::size_t>(i / Tt) + 1];
            for (index_t b = 0; b < Bn; ++b) q_off[b + 1] += q_off[b];
            const V q = linear(s_run, w_q, b_q);
            const V a = attn.project_out(ragged_attention<T, B>({q, 0}, q_off, {KV, 0}, {KV, H}, Tt, lengths, H, cfg_.heads));
            const V y = run_rest_of_layer(s_run, a);
            const V p = reshape(sigmoid((*halting_unit)(y)), {nr});
            // the halting decision, on the device (rows that do not run: masks 0, so w 0)
            Tn ra = Tn::empty({nr}), nh = Tn::empty({nr});
            const Tn pv = p.value().contiguous(), cv = cum_run.value().contiguous();
            primitives<B>::act_decide(nr, pv.data(), cv.data(), active.data(), threshold, n, opt.min_iterations, ra.data(), nh.data(),
                                      state.data());
            const V w = halting_step(p, cum_run, r_run, ra, nh);
            const V s_new = interpolate_rows(s_run, y, w);
            if (tracing()) {
                record_cosine(rec, [&] { return s_run.value(); }, [&] { return s_new.value(); }, idx);
                const std::vector<T> ran_on = ra.to_vector(), halted = nh.to_vector();
                for (std::size_t j = 0; j < idx.size(); ++j)
                    if (ran_on[j] == T(0) && halted[j] == T(0)) rec.cosine.back()[static_cast<std::size_t>(idx[j])] = std::numeric_limits<double>::quiet_NaN();
            }
            s_run = s_new;
            active = ra;
        }
        {
            // the tokens not kept yet stop here: out of iterations, or stopped since the last read
            std::vector<std::int64_t> rest;
            for (std::size_t j = 0; j < idx.size(); ++j)
                if (tokens[static_cast<std::size_t>(idx[j])] && !kept[static_cast<std::size_t>(idx[j])]) rest.push_back(static_cast<std::int64_t>(j));
            keep(rest);
        }
        rec.compact = true;
        R = r_done.size() == 1 ? r_done[0] : concat(r_done, 0);  // only its sum is used
        read_record(rec, done_rows, state_done, R.value());
        // every token stopped at the same read: its states, in row order, are the result
        const bool all_at_once = s_done.size() == 1 && static_cast<index_t>(done_rows.size()) == N;
        s = all_at_once ? s_done[0] : row_update(s, done_rows, s_done.size() == 1 ? s_done[0] : concat(s_done, 0));
        return {reshape(s, {Bn, Tt, H}), ponder_cost(R, rec), std::move(rec), {}, {}};
    }
    /// The compact path's record from the device, in one read: the kept tokens' (rows, in
    /// keeping order) iterations run, first iteration with a NaN halting probability (0: none)
    /// and remainders. A NaN probability is reported here, at its iteration and token.
    void read_record(halting_record& rec, const std::vector<std::int64_t>& rows, const std::vector<Tn>& state_parts, const Tn& remainders) const {
        const index_t m = static_cast<index_t>(rows.size());
        std::vector<V> parts;
        for (const Tn& t : state_parts) parts.push_back(V::constant(t.reshape({2 * t.shape()[0]})));
        parts.push_back(V::constant(remainders));
        const std::vector<T> host = (parts.size() == 1 ? parts[0] : concat(parts, 0)).value().to_vector();
        const auto N = static_cast<std::size_t>(rec.batch * rec.length);
        rec.N.assign(N, 0);
        rec.R.assign(N, 0.0);
        std::int64_t bad_iteration = 0, bad_token = -1;
        for (index_t k = 0; k < m; ++k) {
            const auto i = static_cast<std::size_t>(rows[static_cast<std::size_t>(k)]);
            rec.N[i] = static_cast<int>(host[static_cast<std::size_t>(2 * k)]);
            rec.R[i] = static_cast<double>(host[static_cast<std::size_t>(2 * m + k)]);
            const auto first_bad = static_cast<std::int64_t>(host[static_cast<std::size_t>(2 * k + 1)]);
            if (first_bad > 0 && (bad_token < 0 || first_bad < bad_iteration || (first_bad == bad_iteration && rows[k] < bad_token))) {
                bad_iteration = first_bad;
                bad_token = rows[static_cast<std::size_t>(k)];
            }
        }
        DEPTHLAB_CHECK(bad_token < 0, numeric_error, "ACT: iteration ", bad_iteration, ": the halting probability of token ", bad_token,
                       " is nan: the input or the state holds a non-finite value");
        rec.iterations = *std::max_element(rec.N.begin(), rec.N.end());
        for (int n = 1; n <= rec.iterations; ++n)
            rec.running_per_iteration.push_back(static_cast<index_t>(std::count_if(rec.N.begin(), rec.N.end(), [n](int v) { return v >= n; })));
    }
    /// `running` (sorted, ⊆ source) plus rows of `source` (sorted; null: every row, 0..Bn·Tt)
    /// that do not run, up to the next multiple of opt.row_quantum (at most all of the source),
    /// sorted. Each padding row goes to the sequence with the fewest rows so far that has a
    /// spare one: the attention pads every sequence's queries to the longest one's count, which
    /// this keeps as low as the spares allow.
    std::vector<std::int64_t> padded_rows(const std::vector<std::int64_t>& running, const std::vector<std::int64_t>* source, index_t Bn,
                                          index_t Tt) const {
        const auto q = static_cast<std::size_t>(std::max(1, opt.row_quantum));
        const std::size_t source_rows = source ? source->size() : static_cast<std::size_t>(Bn * Tt);
        const std::size_t target = std::min(source_rows, (running.size() + q - 1) / q * q);
        if (target <= running.size()) return running;
        std::vector<std::vector<std::int64_t>> spare(static_cast<std::size_t>(Bn));  // per sequence, in order
        std::vector<std::size_t> count(static_cast<std::size_t>(Bn), 0), taken(static_cast<std::size_t>(Bn), 0);
        for (std::int64_t i : running) ++count[static_cast<std::size_t>(i / Tt)];
        std::size_t k = 0;
        for (std::size_t s = 0; s < source_rows; ++s) {
            const std::int64_t i = source ? (*source)[s] : static_cast<std::int64_t>(s);
            if (k < running.size() && running[k] == i) ++k;
            else spare[static_cast<std::size_t>(i / Tt)].push_back(i);
        }
        std::vector<std::int64_t> rows = running;
        while (rows.size() < target) {
            std::size_t best = spare.size();
            for (std::size_t b = 0; b < spare.size(); ++b)
                if (taken[b] < spare[b].size() && (best == spare.size() || count[b] < count[best])) best = b;
            rows.push_back(spare[best][taken[best]++]);
            ++count[best];
        }
        std::sort(rows.begin(), rows.end());
        return rows;
    }
    /// Positions of `sub` inside `super` (both sorted, sub ⊆ super).
    static std::vector<std::int64_t> positions_within(const std::vector<std::int64_t>& super, const std::vector<std::int64_t>& sub) {
        std::vector<std::int64_t> pos(sub.size());
        std::size_t k = 0;
        for (std::size_t j = 0; j < sub.size(); ++j) {
            while (super[k] != sub[j]) ++k;
            pos[j] = static_cast<std::int64_t>(k);
        }
        return pos;
    }
    /// What the compact path implements: post-LN (the paper's), both sub-layers on, and no
    /// dropout to apply (eval mode, or dropout 0).
    bool compact_applies() const {
        const bool dropout = this->is_training() && (cfg_.dropout > 0 || cfg_.attention_dropout > 0);
        return !cfg_.norm_first && layer->self_attention.enabled && layer->feed_forward.enabled && !dropout;
    }
    /// The layer after its attention core, for running rows only: output projection done by
    /// the caller; residual + LN (post-LN) and the feed-forward sub-layer.
    V run_rest_of_layer(const V& s_run, const V& attn_out) const {
        const auto& norm = layer->self_attention.norm;
        return layer->feed_forward(residual_layer_norm(s_run, attn_out, norm.weight, norm.bias, static_cast<T>(norm.eps)));
    }

    nn::transformer_config cfg_;
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).
template <class T, class B, class Policy>
ActEncoder<T, B, Policy>::ActEncoder(const nn::transformer_config& cfg, Generator& gen, act_options opt)
    : opt(opt), cfg_(cfg) {
    layer = &this->register_module("shared", std::make_unique<nn::EncoderLayer<T, B>>(cfg, gen));
    halting_unit = &this->register_module("halting", std::make_unique<nn::Linear<T, B>>(cfg.dim, 1, gen, nn::init_scheme::bert));
    // p = sigmoid(w·y + b): w ~ N(0, 0.02), b = 0 (the paper) or 1 (Graves)
    const T policy_bias = std::is_same_v<Policy, act_graves> ? T(1) : T(0);
    opt.validate();
    halting_unit->bias.value().fill_(std::isnan(opt.halting_bias) ? policy_bias : static_cast<T>(opt.halting_bias));
}

template <class T, class B, class Policy>
act_result<T, B> ActEncoder<T, B, Policy>::operator()(const Var<T, B>& x, const std::vector<index_t>& lengths) const {
    const Shape& sx = x.shape();
    DEPTHLAB_CHECK(sx.rank() == 3 && static_cast<index_t>(lengths.size()) == sx[0], shape_error, "ActEncoder: input ", sx, " with ",
                   lengths.size(), " lengths");
    opt.validate();
    DEPTHLAB_CHECK(sx[0] >= 1 && sx[1] >= 1, usage_error, "ActEncoder: an empty batch (input ", sx, ")");
    for (std::size_t b = 0; b < lengths.size(); ++b)
        DEPTHLAB_CHECK(lengths[b] >= 1 && lengths[b] <= sx[1], usage_error, "ActEncoder: sequence ", b, " has length ", lengths[b],
                       ", outside [1, ", sx[1], "]");
    const flop_scope flops;
    const auto counted = [&](act_result<T, B> r) {
        r.record.flops = flops.flops();
        return r;
    };
    if constexpr (std::is_same_v<Policy, act>) {
        if (opt.compact && compact_applies()) return counted(compact_forward(x, lengths));
    }
    if constexpr (std::is_same_v<Policy, pondernet>) {
        DEPTHLAB_CHECK(opt.lambda_p > 0 && opt.lambda_p < 1, usage_error, "ActEncoder<pondernet>: lambda_p must lie in (0, 1), got ",
                       opt.lambda_p);
        return counted(pondernet_forward(x, lengths));
    } else {
        return counted(dense_forward(x, lengths));
    }
}

}  // namespace depthlab::halting
