#pragma once
// train::Trainer: the loop a research user writes every time, once. Per step: zero the
// gradients, run `accumulate` micro-batches (backward on loss / accumulate), clip by global
// norm, set the scheduled learning rate, update. Around it: a progress line and a
// metrics.jsonl record every log_every steps (the micro-batch means of the logged values,
// tokens/s, ETA), an evaluation every eval_every steps and at the end (model in eval mode,
// its record in metrics.jsonl), a checkpoint every save_every steps and at the end, exact
// resume (parameters, optimiser, step, RNGs and data-stream positions: see checkpointer),
// a time budget, a NaN/Inf guard (a non-finite loss or gradient stops the run with an error
// naming the step, and no checkpoint holding a non-finite value is ever written) and a
// divergence guard for runs that blow up while staying finite (see divergence_guard): the
// checkpoint left on disk after a stopped run is always one written before things went wrong.
//
// Data parallelism (options.comm, a communicator of several ranks; dist/data_parallel.hpp):
// rank 0's parameters are broadcast at the start; each step's global batch is world x
// accumulate micro-batches of one stream, rank r training on its own A of them and skipping
// the others through the `skip` hook (which must be set); the gradients are summed into
// fixed-order buckets and all-reduced once after the last backward; every rank takes the
// same step. Rank 0 alone prints, writes metrics.jsonl and checkpoints; the progress values
// and tokens/s are over all ranks; the time budget is rank 0's clock. Accumulation on one
// process goes through the same buckets, so 2 ranks x accumulate 1 equal 1 process x
// accumulate 2 bit for bit.
//
//     train::Trainer<float, B> trainer(model, opt, {.steps = 2000, .out = "runs/x", .resume = resume});
//     trainer.schedule = [&](std::int64_t s) { return warmup.lr(s); };
//     trainer.checkpoint().track("data", data_rng);
//     trainer.fit([&] {
//         const auto b = next_batch();
//         auto loss = cross_entropy(model(b.x), b.y);
//         return train::micro_batch<float, B>{.loss = loss, .logged = {{"loss", loss}}, .tokens = b.tokens};
//     });
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "depthlab/autodiff/ops.hpp"
#include "depthlab/core/error.hpp"
#include "depthlab/dist/communicator.hpp"
#include "depthlab/dist/data_parallel.hpp"
#include "depthlab/nn/module.hpp"
#include "depthlab/optim/clip.hpp"
#include "depthlab/optim/optimizer.hpp"
#include "depthlab/io/config.hpp"  // (io::detail::to_text / from_text: train.minutes)
#include "depthlab/io/csv.hpp"
#include "depthlab/train/checkpointer.hpp"
#include "depthlab/train/progress.hpp"

namespace depthlab::train {

/// Named values of a progress line, in order.
using log_values = std::vector<std::pair<std::string, double>>;

/// Divergence that stays finite: a loss that runs away from its level, or weights that grow
/// without bound (a learning rate of 1e6 trains to a loss of 1e13 without a single NaN).
/// Checked after every step, before that step's checkpoint; a trip throws numeric_error
/// naming the step, the quantity and the bound.
///
/// A checkpoint counts as known good once `confirm_steps` further steps passed the guard (or
/// the run ended normally after it). Until the newest is, the newest known-good one stays on
/// disk beside it as `checkpoint.previous.safetensors` (and the oldest unconfirmed one as
/// `checkpoint.candidate.safetensors`, promoted to previous when it is confirmed, so that
/// frequent saves still move `previous` forward); a trip, the NaN guard's included, puts
/// `previous` back in place and keeps the suspect newest one as
/// `checkpoint.suspect.safetensors`. Hard links: no checkpoint is copied.
struct divergence_guard {
    bool enabled = true;
    /// Trip when a step's loss (the mean of its micro-batches and ranks) exceeds
    /// level + (loss_factor − 1) · max(|level|, 1), level being the running mean (EMA, 0.9)
    /// of the earlier steps' losses. 0: this test off.
    double loss_factor = 10;
    /// Trip when the parameters' root mean square sqrt(Σθ² / n) exceeds this (trained
    /// transformers sit near 0.02–1). 0: this test off.
    double max_parameter_rms = 1e3;
    /// Steps after a checkpoint before it counts as known good.
    std::int64_t confirm_steps = 20;

    void validate() const {
        DEPTHLAB_CHECK(std::isfinite(loss_factor) && (loss_factor == 0 || loss_factor > 1), usage_error, "trainer: divergence.loss_factor ",
                       loss_factor, " must be 0 (off) or a finite number > 1");
        DEPTHLAB_CHECK(std::isfinite(max_parameter_rms) && max_parameter_rms >= 0, usage_error, "trainer: divergence.max_parameter_rms ",
                       max_parameter_rms, " must be 0 (off) or a finite number > 0");
        DEPTHLAB_CHECK(confirm_steps >= 0, usage_error, "trainer: divergence.confirm_steps ", confirm_steps, " < 0");
    }
};

struct trainer_options {
    std::int64_t steps = 1000;       // optimiser steps in all (a resumed run continues up to this)
    std::int64_t accumulate = 1;     // micro-batches per step
    double clip = 1.0;               // clip the gradient's global norm to this (0: off)
    std::int64_t log_every = 50;     // steps between progress lines
    std::int64_t eval_every = 0;     // steps between evaluations (0: only at the end)
    std::int64_t save_every = 500;   // steps between checkpoints (and one at the end)
    double max_train_minutes = 0;    // stop (and save) after this much training time, the minutes of budgeted runs resumed included (0: no limit)
    // With max_train_minutes: the `schedule` and `before_step` hooks see the schedule's position
    // max(steps done, steps × minutes trained / max_train_minutes) instead of the steps done, so
    // that a warm-up, ramp or decay written over `steps` ends with the time budget on a machine
    // slower than planned (and with `steps` on a faster one). The step count that `steps`
    // fixes then depends on the machine's speed; the schedule's shape does not.
    bool schedule_by_time = false;
    std::string out = {};            // directory of metrics.jsonl and checkpoint.safetensors ("": none)
    bool resume = false;             // continue from <out>/checkpoint.safetensors
    dist::communicator* comm = nullptr;  // the ranks of a data-parallel run (null: this process alone)
    // Time every op of this many steps (op_profiler), from the 6th step of a fit on (after the
    // warm-up: primitives planned, the allocator's cache filled), then print the table and
    // write <out>/profile.csv. Evaluations and checkpoints in those steps are left out. 0: off.
    std::int64_t profile_steps = 0;
    divergence_guard divergence = {};  // on by default

    /// Throws usage_error naming the first bad field.
    void validate() const {
        DEPTHLAB_CHECK(steps >= 0, usage_error, "trainer: steps ", steps, " < 0");
        DEPTHLAB_CHECK(accumulate >= 1, usage_error, "trainer: accumulate ", accumulate, " < 1");
        DEPTHLAB_CHECK(std::isfinite(clip) && clip >= 0, usage_error, "trainer: clip ", clip, " is not a finite number >= 0");
        DEPTHLAB_CHECK(log_every >= 1, usage_error, "trainer: log_every ", log_every, " < 1");
        DEPTHLAB_CHECK(eval_every >= 0, usage_error, "trainer: eval_every ", eval_every, " < 0");
        DEPTHLAB_CHECK(save_every >= 1, usage_error, "trainer: save_every ", save_every, " < 1");
        DEPTHLAB_CHECK(std::isfinite(max_train_minutes) && max_train_minutes >= 0, usage_error, "trainer: max_train_minutes ",
                       max_train_minutes, " is not a finite number >= 0");
        DEPTHLAB_CHECK(!resume || !out.empty(), usage_error, "trainer: resume needs an output directory");
        DEPTHLAB_CHECK(!schedule_by_time || max_train_minutes > 0, usage_error,
                       "trainer: schedule_by_time needs a time budget (max_train_minutes > 0)");
        DEPTHLAB_CHECK(profile_steps >= 0, usage_error, "trainer: profile_steps ", profile_steps, " < 0");
        divergence.validate();
    }
};

/// What one micro-batch gives the trainer.
template <class T, class B = backend::cpu>
struct micro_batch {
    Var<T, B> loss;                                                // backward runs on loss / accumulate
    std::vector<std::pair<std::string, Var<T, B>>> logged = {};    // scalars whose means make the progress line
    std::vector<std::pair<std::string, double>> host_logged = {};  // host values, averaged the same way
    std::int64_t tokens = 0;                                       // for tokens/s
};

/// How fit() ended.
struct fit_result {
    std::int64_t first_step = 0, steps = 0;  // where this process started and ended
    double seconds = 0, tokens_per_s = 0;
    bool stopped_by_time = false;
    log_values last_log;  // the values of the last progress line
};

template <class T, class B = backend::cpu>
class Trainer {
public:
    Trainer(nn::Module<T, B>& model, optim::Optimizer<T, B>& opt, trainer_options o)
        : model_(model), opt_(opt), o_(std::move(o)), comm_(o_.comm ? o_.comm : &dist::local()),
          ckpt_(o_.out.empty() ? std::string() : o_.out + "/checkpoint.safetensors") {
        o_.validate();
        ckpt_.set_communicator(comm_);
        if (!o_.out.empty() && is_root()) {
            std::error_code ec;
            std::filesystem::create_directories(o_.out, ec);
            DEPTHLAB_CHECK(std::filesystem::is_directory(o_.out), io_error, "trainer: output directory '", o_.out,
                           "' cannot be created", ec ? " (" + ec.message() + ")" : std::string(" (a file of that name exists)"));
        }
    }

    // ---- hooks (all optional) ----
    /// The learning rate of the step about to be taken, given the steps done so far (with
    /// trainer_options::schedule_by_time, the schedule's position: see there).
    std::function<double(std::int64_t steps_done)> schedule;
    /// Called before each step (e.g. a loss weight that warms up), given what `schedule` is given.
    std::function<void(std::int64_t steps_done)> before_step;
    /// Values appended to each progress line after the means (e.g. the current τ, the epoch).
    std::function<log_values(std::int64_t step)> log_extra;
    /// Called after each progress line with its values (e.g. a collapse warning).
    std::function<void(std::int64_t step, const log_values& line)> on_log;
    /// An evaluation (the model is in eval mode, under no_grad); its record goes into
    /// metrics.jsonl with the step. `final` is true for the one at the end. In a
    /// data-parallel run every rank calls it (it may share the work through the
    /// communicator); rank 0's record is written.
    std::function<nlohmann::ordered_json(std::int64_t step, bool final)> evaluate;
    /// Data parallelism: consumes, without computing anything on it, the next micro-batch of
    /// the stream `next` reads (one that another rank trains on). Required with several ranks.
    std::function<void()> skip;

    [[nodiscard]] checkpointer<T, B>& checkpoint() { return ckpt_; }
    [[nodiscard]] const trainer_options& options() const { return o_; }
    [[nodiscard]] std::int64_t step() const { return step_; }
    /// Minutes of training so far, those of the runs this one resumed included.
    [[nodiscard]] double minutes_trained() const { return minutes_; }
    /// What the `schedule` and `before_step` hooks are given now (trainer_options::schedule_by_time).
    [[nodiscard]] std::int64_t schedule_step() const {
        if (!o_.schedule_by_time) return step_;
        const double by_time = static_cast<double>(o_.steps) * std::min(1.0, minutes_ / o_.max_train_minutes);
        return std::max(step_, static_cast<std::int64_t>(by_time));
    }
    [[nodiscard]] std::string metrics_path() const { return o_.out.empty() ? std::string() : o_.out + "/metrics.jsonl"; }
    /// Where the last known-good checkpoint waits while the newest one is not yet confirmed
    /// (divergence_guard), and where a suspect one goes when a trip puts that one back.
    [[nodiscard]] std::string previous_checkpoint_path() const { return sibling("previous"); }
    [[nodiscard]] std::string suspect_checkpoint_path() const { return sibling("suspect"); }
    [[nodiscard]] std::string candidate_checkpoint_path() const { return sibling("candidate"); }
    /// The progress meter of the current fit() (for records of one's own; null outside fit).
    [[nodiscard]] progress_meter* meter() { return meter_ ? &*meter_ : nullptr; }
    [[nodiscard]] dist::communicator& comm() const { return *comm_; }
    /// Whether this process prints and writes files (rank 0).
    [[nodiscard]] bool is_root() const { return comm_->is_root(); }
    /// The micro-batches of a global batch this rank trains on.
    [[nodiscard]] dist::shard_of shard() const { return {comm_->rank(), comm_->size(), o_.accumulate}; }

    /// With options().resume, loads `<out>/checkpoint.safetensors` into everything tracked and
    /// returns the step it holds (else 0, and a fresh run's metrics.jsonl starts empty).
    std::int64_t restore();
    /// Writes the checkpoint now (no-op without an output directory). Collective in a
    /// data-parallel run (rank 0 writes, with every rank's tracked generators).
    void save();

    /// Trains up to options().steps; `next` gives one micro-batch (forward pass included).
    fit_result fit(const std::function<micro_batch<T, B>()>& next);

private:
    /// schedule_step() as rank 0 has it: with schedule_by_time every rank's clock differs, and
    /// ranks that took different learning rates would no longer hold the same parameters.
    std::int64_t agreed_schedule_step() {
        std::int64_t s = schedule_step();
        if (o_.schedule_by_time && comm_->distributed()) comm_->host_side().broadcast(&s, 1, 0);
        return s;
    }
    /// Whether the time budget is spent: rank 0's clock decides for every rank (ranks that
    /// stopped at different steps would wait for each other in the next all-reduce).
    bool time_is_up(double minutes_so_far) {
        if (o_.max_train_minutes <= 0) return false;
        std::int32_t up = minutes_so_far > o_.max_train_minutes ? 1 : 0;
        if (comm_->distributed()) comm_->host_side().broadcast(&up, 1, 0);
        return up != 0;
    }
    /// Turns this rank's sums of logged values, micro-batch count and tokens since the last
    /// line into those of every rank (in place), and counts the tokens.
    void all_ranks(log_values& sums, std::int64_t& counted, std::int64_t& tokens);
    /// The sums, count and tokens of every rank, in place (a no-op alone).
    void sum_over_ranks(log_values& sums, std::int64_t& counted, std::int64_t& tokens) const;
    void add_means(log_values& sums, const micro_batch<T, B>& mb, bool first);
    void run_evaluation(bool final);
    /// Prints the table of a profile of `steps` steps (rank 0) and writes <out>/profile.csv.
    void report_profile(const op_profiler& prof, std::int64_t first, std::int64_t steps) const;
    /// <out>/checkpoint.<what>.safetensors
    [[nodiscard]] std::string sibling(const char* what) const {
        return o_.out.empty() ? std::string() : o_.out + "/checkpoint." + what + ".safetensors";
    }
    /// sqrt(Σθ² / n) over the distinct parameters (one device-to-host read).
    [[nodiscard]] double parameter_rms(const std::vector<Var<T, B>>& params) const;
    /// divergence_guard: throws numeric_error when the step just taken (its mean loss over
    /// micro-batches and ranks) ran away; else updates the loss level and confirms the newest
    /// checkpoint once it is old enough.
    void guard(double step_loss, const std::vector<Var<T, B>>& params);
    /// After a numeric error: puts the last known-good checkpoint back when the newest is
    /// still unconfirmed, and says which checkpoint the run leaves on disk.
    [[nodiscard]] std::string keep_good_checkpoint();
    /// Drops checkpoint.previous and .candidate (the newest checkpoint is now known good).
    void confirm_checkpoint();
    /// `to` as a hard link to `from` (a copy where links fail), replacing it.
    static void link_checkpoint(const std::string& from, const std::string& to);
    /// The progress values summed since the last line (pending_*) into checkpoint metadata and
    /// back, so that a resumed run's first record equals the uninterrupted run's.
    void save_pending();
    void restore_pending();

    nn::Module<T, B>& model_;
    optim::Optimizer<T, B>& opt_;
    trainer_options o_;
    dist::communicator* comm_;
    checkpointer<T, B> ckpt_;
    std::optional<progress_meter> meter_;
    std::int64_t step_ = 0, last_saved_ = -1;
    // divergence_guard: the running loss level (NaN: none yet), the step of the newest
    // checkpoint while it is unconfirmed (-1: it is known good, or there is none), and the
    // step of checkpoint.previous (-1: unknown or none)
    double loss_level_ = std::numeric_limits<double>::quiet_NaN();
    std::int64_t unconfirmed_ = -1, previous_step_ = -1, candidate_ = -1;
    log_values pending_;  // sums of the logged values since the last progress line
    std::int64_t pending_count_ = 0, pending_tokens_ = 0;
    double minutes_ = 0;  // of training, resumes included (saved as the checkpoint's train.minutes under a time budget)
    bool restored_ = false;
};

// Defined outside the class body, so not inline: under DEPTHLAB_COMPILED a program calls the
// library's copy instead of compiling it again (include/depthlab/compiled.hpp).

template <class T, class B>
std::int64_t Trainer<T, B>::restore() {
    if (!o_.resume) return step_;
    DEPTHLAB_CHECK(std::filesystem::exists(ckpt_.path()), io_error, "trainer: resume: no checkpoint at ", ckpt_.path());
    step_ = ckpt_.load(model_, &opt_);
    last_saved_ = step_;
    if (const auto it = ckpt_.metadata().find("train.minutes"); it != ckpt_.metadata().end()) {  // (absent: older or unbudgeted)
        io::detail::from_text(it->first, it->second, minutes_);  // (io_error naming the key if it is not a number)
        DEPTHLAB_CHECK(std::isfinite(minutes_) && minutes_ >= 0, io_error, "trainer: resume: ", ckpt_.path(), " has train.minutes ",
                       minutes_, ", not a finite number >= 0");
    }
    restore_pending();
    // A checkpoint.previous or .candidate beside it: the run that wrote it stopped before
    // confirming it (the candidate's step is unknown: counted from here).
    const bool candidate = std::filesystem::exists(sibling("candidate"));
    unconfirmed_ = candidate || std::filesystem::exists(sibling("previous")) ? step_ : -1;
    candidate_ = candidate ? step_ : -1;
    restored_ = true;
    if (is_root()) {
        std::printf("resumed from %s at step %lld\n", ckpt_.path().c_str(), static_cast<long long>(step_));
        const auto& m = ckpt_.metadata();
        const auto was = [&](const char* k) { const auto it = m.find(k); return it == m.end() ? std::string() : it->second; };
        if (!was("dist.ranks").empty() &&
            (was("dist.ranks") != std::to_string(comm_->size()) || was("dist.accumulate") != std::to_string(o_.accumulate)))
            std::printf("note: the checkpoint was written by %s rank(s) x accumulate %s, this run has %d x %lld: the global batch "
                        "and each rank's share of it change from here on\n", was("dist.ranks").c_str(), was("dist.accumulate").c_str(),
                        comm_->size(), static_cast<long long>(o_.accumulate));
    }
    return step_;
}

template <class T, class B>
void Trainer<T, B>::save() {
    if (ckpt_.path().empty()) return;
    ckpt_.metadata()["dist.ranks"] = std::to_string(comm_->size());  // (a resume on other ranks says so)
    ckpt_.metadata()["dist.accumulate"] = std::to_string(o_.accumulate);
    if (o_.max_train_minutes > 0)  // (only under a budget: without one, the same run writes the same bytes)
        ckpt_.metadata()["train.minutes"] = io::detail::to_text(minutes_);  // (exact: the shortest form that reads back the same)
    save_pending();
    // divergence_guard: a known-good newest checkpoint becomes checkpoint.previous; an
    // unconfirmed newest one becomes checkpoint.candidate when there is none (the oldest
    // unconfirmed checkpoint, promoted to previous once it is confirmed) and is otherwise
    // replaced. Hard links (no copy), which the atomic write below leaves at the old file.
    const bool rotate = o_.divergence.enabled && o_.divergence.confirm_steps > 0 && last_saved_ >= 0;
    const bool as_previous = rotate && unconfirmed_ < 0, as_candidate = rotate && unconfirmed_ >= 0 && candidate_ < 0;
    const char* keep_as = as_previous ? "previous" : as_candidate ? "candidate" : nullptr;
    if (keep_as && is_root()) link_checkpoint(ckpt_.path(), sibling(keep_as));
    try {
        ckpt_.save(model_, &opt_, step_);
    } catch (const numeric_error&) {  // (the newest file is unchanged: undo the link)
        if (keep_as && is_root()) std::filesystem::remove(sibling(keep_as));
        throw;
    }
    if (as_previous) previous_step_ = last_saved_;
    if (as_candidate) candidate_ = last_saved_;
    if (o_.divergence.enabled && o_.divergence.confirm_steps > 0) unconfirmed_ = step_;
    last_saved_ = step_;
}

template <class T, class B>
void Trainer<T, B>::save_pending() {
    auto& m = ckpt_.metadata();
    std::erase_if(m, [](const auto& kv) { return kv.first.rfind("train.log.", 0) == 0; });
    log_values sums = pending_;
    std::int64_t count = pending_count_, tokens = pending_tokens_;
    sum_over_ranks(sums, count, tokens);  // (every rank's share; restore_pending hands it all to rank 0)
    if (!std::isnan(loss_level_)) m["train.loss_level"] = io::detail::to_text(loss_level_);
    if (count == 0) return;
    m["train.log.count"] = std::to_string(count);
    m["train.log.tokens"] = std::to_string(tokens);
    for (std::size_t i = 0; i < sums.size(); ++i) {
        m["train.log." + std::to_string(i) + ".name"] = sums[i].first;
        m["train.log." + std::to_string(i) + ".sum"] = io::detail::to_text(sums[i].second);
    }
}

template <class T, class B>
void Trainer<T, B>::restore_pending() {
    const auto& m = ckpt_.metadata();
    const auto number = [&](const std::string& key, auto& out) { io::detail::from_text(key, m.at(key), out); };
    if (m.count("train.loss_level")) number("train.loss_level", loss_level_);
    pending_.clear();
    pending_count_ = pending_tokens_ = 0;
    if (!m.count("train.log.count") || !is_root()) return;  // (the other ranks start their share from zero)
    number("train.log.count", pending_count_);
    number("train.log.tokens", pending_tokens_);
    for (std::size_t i = 0;; ++i) {
        const std::string key = "train.log." + std::to_string(i);
        if (!m.count(key + ".name")) break;
        DEPTHLAB_CHECK(m.count(key + ".sum"), io_error, "trainer: resume: ", ckpt_.path(), " has '", key, ".name' but no '", key, ".sum'");
        double v = 0;
        number(key + ".sum", v);
        pending_.emplace_back(m.at(key + ".name"), v);
    }
}

template <class T, class B>
double Trainer<T, B>::parameter_rms(const std::vector<Var<T, B>>& params) const {
    using P = primitives<B>;
    auto parts = Tensor<double, B>::zeros({static_cast<index_t>(params.size())});
    double n = 0;
    for (std::size_t j = 0; j < params.size(); ++j) {
        const auto& v = params[j].value();
        P::sum_squares_to(v.numel(), v.data(), parts.data() + static_cast<index_t>(j));
        n += static_cast<double>(v.numel());
    }
    double total = 0;
    for (double x : parts.to_host()) total += x;
    return n > 0 ? std::sqrt(total / n) : 0.0;
}

template <class T, class B>
void Trainer<T, B>::guard(double step_loss, const std::vector<Var<T, B>>& params) {
    const divergence_guard& g = o_.divergence;
    if (!g.enabled) return;
    if (g.loss_factor > 0) {
        if (!std::isnan(loss_level_)) {
            const double bound = loss_level_ + (g.loss_factor - 1) * std::max(std::abs(loss_level_), 1.0);
            DEPTHLAB_CHECK(step_loss <= bound, numeric_error, "diverged: the loss ", step_loss, " is above ", bound, ", the bound that ",
                           "divergence.loss_factor ", g.loss_factor, " sets over the running loss ", loss_level_);
            loss_level_ = 0.9 * loss_level_ + 0.1 * step_loss;
        } else if (std::isfinite(step_loss)) {
            loss_level_ = step_loss;
        }
    }
    if (g.max_parameter_rms > 0) {
        const double rms = parameter_rms(params);
        DEPTHLAB_CHECK(rms <= g.max_parameter_rms, numeric_error, "diverged: the parameters' root mean square is ", rms,
                       ", above divergence.max_parameter_rms ", g.max_parameter_rms);
    }
    const std::int64_t done = step_ + 1;  // (the step just taken passed)
    if (candidate_ >= 0 && done - candidate_ >= g.confirm_steps) {  // the candidate is known good: it becomes previous
        if (is_root()) std::filesystem::rename(sibling("candidate"), sibling("previous"));
        previous_step_ = candidate_;
        candidate_ = -1;
    }
    if (unconfirmed_ >= 0 && done - unconfirmed_ >= g.confirm_steps) confirm_checkpoint();
}

template <class T, class B>
void Trainer<T, B>::confirm_checkpoint() {
    unconfirmed_ = candidate_ = previous_step_ = -1;
    if (!is_root() || o_.out.empty()) return;
    std::error_code ec;
    std::filesystem::remove(sibling("previous"), ec);
    std::filesystem::remove(sibling("candidate"), ec);
}

template <class T, class B>
void Trainer<T, B>::link_checkpoint(const std::string& from, const std::string& to) {
    std::error_code ec;
    std::filesystem::remove(to, ec);
    std::filesystem::create_hard_link(from, to, ec);
    if (ec) std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);  // (a file system without hard links)
}

template <class T, class B>
std::string Trainer<T, B>::keep_good_checkpoint() {
    if (last_saved_ < 0) return {};
    const bool roll_back = unconfirmed_ >= 0 && std::filesystem::exists(sibling("previous"));
    if (!roll_back)
        return depthlab::detail::cat("; the last checkpoint (step ", last_saved_, ", ", ckpt_.path(), ") is kept",
                                     unconfirmed_ >= 0 ? " (no earlier one was confirmed by the guard)" : "");
    if (is_root()) {
        std::error_code ec;
        std::filesystem::remove(sibling("candidate"), ec);  // (written after the known-good one, not confirmed either)
        std::filesystem::rename(ckpt_.path(), sibling("suspect"));
        std::filesystem::rename(sibling("previous"), ckpt_.path());
    }
    const std::string was = previous_step_ >= 0 ? depthlab::detail::cat(" (step ", previous_step_, ")") : std::string();
    return depthlab::detail::cat("; ", ckpt_.path(), " is again the last known-good checkpoint", was, ", and the one of step ", last_saved_,
                                 ", written too shortly before, is kept as ", sibling("suspect"));
}

template <class T, class B>
fit_result Trainer<T, B>::fit(const std::function<micro_batch<T, B>()>& next) {
    const dist::shard_of shard = this->shard();
    DEPTHLAB_CHECK(shard.world == 1 || skip, usage_error, "trainer: a data-parallel run (", shard.world,
                   " ranks) needs the `skip` hook: each rank skips the micro-batches of the others");
    if (o_.resume && !restored_) restore();
    DEPTHLAB_CHECK(step_ <= o_.steps, usage_error, "trainer: the checkpoint ", ckpt_.path(), " is at step ", step_, ", beyond steps ", o_.steps,
                   ": nothing to train (give more steps to continue it)");
    if (step_ == o_.steps && is_root())
        std::printf("trainer: nothing to train (%s)\n", restored_ ? "resumed at the last step: give more steps to continue" : "steps is 0");
    const auto params = dist::distinct_parameters(opt_.parameters());
    dist::broadcast_parameters(*comm_, params);
    fit_result r;
    r.first_step = step_;
    meter_.emplace(o_.steps, step_, is_root() ? metrics_path() : std::string());
    const auto start = std::chrono::steady_clock::now();
    const double minutes_before = minutes_;
    if (o_.max_train_minutes > 0) meter_->set_deadline(std::max(0.0, o_.max_train_minutes - minutes_before) * 60.0);
    const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    const auto clock = [&] { minutes_ = minutes_before + seconds() / 60.0; };
    log_values& sums = pending_;
    std::int64_t& counted = pending_count_;
    std::int64_t& tokens = pending_tokens_;
    double gnorm = 0;
    // Accumulation and data parallelism sum per-micro-batch gradients in fixed-order buckets.
    std::optional<dist::gradient_buckets<T, B>> buckets;
    if (shard.micro_batches() > 1) buckets.emplace(*comm_, params);
    const double loss_scale = 1.0 / static_cast<double>(shard.micro_batches());
    // trainer_options::profile_steps: the profiled steps start after 5 warm-up steps; while
    // the profiler lives it is this thread's active one, so profile_mark reaches it
    std::optional<op_profiler> profiler;
    std::int64_t profiled = 0;
    const std::int64_t profile_from = r.first_step + 5;
    // the matrix products' FLOPs of this rank's steps since the last progress line (flop_scope)
    std::int64_t step_flops = 0, flop_steps = 0;
    model_.train();
    while (step_ < o_.steps) {
        if (o_.profile_steps > 0 && step_ == profile_from) profiler.emplace();
        const flop_scope this_step;
        try {
            clock();
            const std::int64_t scheduled = agreed_schedule_step();
            if (before_step) before_step(scheduled);
            opt_.zero_grad();
            if (buckets) buckets->zero();
            for (std::int64_t i = 0; i < shard.before(); ++i) skip();
            profile_mark("trainer: schedule and zero_grad");
            std::string failed;  // a numeric error of this rank (distributed: every rank stops at the all-reduce)
            double step_loss = 0;
            for (std::int64_t a = 0; a < o_.accumulate; ++a) {
                try {
                    micro_batch<T, B> mb = next();
                    const Var<T, B> loss = buckets ? scale(mb.loss, static_cast<T>(loss_scale)) : mb.loss;
                    loss.backward();
                    if (o_.divergence.enabled) step_loss += static_cast<double>(mb.loss.value().item());
                    if (buckets) {
                        buckets->add_gradients();
                        profile_mark("trainer: gradient buckets");
                    }
                    add_means(sums, mb, counted == 0);
                    profile_mark("trainer: logged values read");
                    ++counted;
                    tokens += mb.tokens;
                } catch (const numeric_error& e) {
                    if (shard.world == 1) throw;
                    failed = depthlab::detail::cat("rank ", shard.rank, ": ", e.what());
                    break;
                }
            }
            for (std::int64_t i = 0; i < shard.after(); ++i) skip();
            if (buckets && buckets->finish(!failed.empty()))
                throw numeric_error(failed.empty() ? std::string("a non-finite value on another rank") : failed);
            if (buckets) profile_mark("trainer: gradient all-reduce");
            gnorm = o_.clip > 0 ? optim::clip_grad_norm(opt_.parameters(), o_.clip) : 0.0;
            profile_mark("optimizer: clip_grad_norm");
            if (schedule) opt_.set_lr(schedule(scheduled));
            opt_.step();
            profile_mark("optimizer: step");
            if (o_.divergence.enabled) {
                step_loss /= static_cast<double>(o_.accumulate);
                if (comm_->distributed()) {
                    comm_->host_side().all_reduce(&step_loss, 1, dist::reduce_op::sum);
                    step_loss /= static_cast<double>(comm_->size());
                }
                guard(step_loss, params);
                profile_mark("trainer: divergence guard");
            }
        } catch (const numeric_error& e) {
            throw numeric_error(depthlab::detail::cat("trainer: step ", step_ + 1, ": ", e.what(), "; training stopped", keep_good_checkpoint()));
        }
        ++step_;
        step_flops += this_step.flops();
        ++flop_steps;
        clock();
        const bool out_of_time = time_is_up(minutes_);
        if (step_ % o_.log_every == 0 || step_ == o_.steps || out_of_time) {
            all_ranks(sums, counted, tokens);
            log_values line;
            for (const auto& [k, v] : sums) line.emplace_back(k, v / static_cast<double>(counted));
            if (log_extra)
                for (auto& kv : log_extra(step_)) line.push_back(std::move(kv));
            if (o_.clip > 0) line.emplace_back("grad_norm", gnorm);
            line.emplace_back("lr", opt_.lr());
            line.emplace_back("gflop_per_step", static_cast<double>(step_flops) / static_cast<double>(flop_steps) / 1e9);
            step_flops = flop_steps = 0;
            if (is_root()) meter_->report(step_, line);
            if (on_log) on_log(step_, line);
            r.last_log = line;
            sums.clear();
            counted = 0;
        }
        profile_mark("trainer: progress line");
        if (profiler) profiler->pause();  // (evaluations and checkpoints are not part of a step)
        if (o_.eval_every > 0 && step_ % o_.eval_every == 0 && step_ < o_.steps && !out_of_time) run_evaluation(false);
        if (step_ % o_.save_every == 0 || step_ == o_.steps || out_of_time) save();
        if (profiler) {
            profiler->resume();
            if (++profiled == o_.profile_steps) {
                report_profile(*profiler, profile_from, profiled);
                profiler.reset();
            }
        }
        if (out_of_time) {
            if (is_root())
                std::printf("training stopped by the time budget (%g minutes) at step %lld\n", o_.max_train_minutes,
                            static_cast<long long>(step_));
            r.stopped_by_time = true;
            break;
        }
    }
    all_ranks(sums, counted, tokens);  // (tokens of steps after the last line)
    if (step_ > r.first_step) confirm_checkpoint();  // (the run ended normally after its last checkpoint)
    if (last_saved_ < 0) save();  // (steps 0: the untrained model, so that the checkpoint a program names exists)
    if (profiler) report_profile(*profiler, profile_from, profiled);  // (the fit ended inside the window)
    else if (o_.profile_steps > 0 && profiled == 0 && is_root())
        std::printf("profile: nothing profiled (the fit ran %lld steps; profiling starts after 5)\n", static_cast<long long>(step_ - r.first_step));
    profiler.reset();
    r.steps = step_;
    r.seconds = seconds();
    r.tokens_per_s = meter_->tokens_per_second();
    run_evaluation(true);
    model_.eval();
    return r;
}

template <class T, class B>
void Trainer<T, B>::sum_over_ranks(log_values& sums, std::int64_t& counted, std::int64_t& tokens) const {
    if (!comm_->distributed()) return;
    std::vector<double> v;
    for (const auto& kv : sums) v.push_back(kv.second);
    v.push_back(static_cast<double>(counted));
    v.push_back(static_cast<double>(tokens));
    comm_->host_side().all_reduce(v.data(), v.size(), dist::reduce_op::sum);
    for (std::size_t i = 0; i < sums.size(); ++i) sums[i].second = v[i];
    counted = static_cast<std::int64_t>(v[sums.size()]);
    tokens = static_cast<std::int64_t>(v[sums.size() + 1]);
}

template <class T, class B>
void Trainer<T, B>::all_ranks(log_values& sums, std::int64_t& counted, std::int64_t& tokens) {
    sum_over_ranks(sums, counted, tokens);
    meter_->add_tokens(tokens);
    tokens = 0;
}

template <class T, class B>
void Trainer<T, B>::add_means(log_values& sums, const micro_batch<T, B>& mb, bool first) {
    std::size_t i = 0;
    auto add = [&](const std::string& k, double v) {
        if (first) sums.emplace_back(k, v);
        else {
            DEPTHLAB_CHECK(i < sums.size() && sums[i].first == k, usage_error, "trainer: micro-batches log different values ('", k, "')");
            sums[i].second += v;
        }
        ++i;
    };
    for (const auto& [k, v] : mb.logged) add(k, static_cast<double>(checked_item(v)));  // the one read per value and micro-batch
    for (const auto& [k, v] : mb.host_logged) add(k, v);
}

template <class T, class B>
void Trainer<T, B>::report_profile(const op_profiler& prof, std::int64_t first, std::int64_t steps) const {
    if (!is_root() || steps <= 0) return;
    const double charged = prof.seconds();
    std::printf("profile of steps %lld-%lld (rank 0): %.2f ms per step, evaluations and checkpoints left out\n%s",
                static_cast<long long>(first + 1), static_cast<long long>(first + steps), 1e3 * charged / static_cast<double>(steps),
                prof.table(steps, 25).c_str());
    if (o_.out.empty()) return;
    io::csv_writer csv({"name", "phase", "calls", "seconds", "ms_per_step", "share"});
    for (const auto& row : prof.rows())
        csv.row(row.name, row.phase, row.calls, row.seconds, 1e3 * row.seconds / static_cast<double>(steps), charged > 0 ? row.seconds / charged : 0.0);
    csv.write(o_.out + "/profile.csv");
    std::printf("profile: %s/profile.csv\n", o_.out.c_str());
}

template <class T, class B>
void Trainer<T, B>::run_evaluation(bool final) {
    if (!evaluate) return;
    model_.eval();
    nlohmann::ordered_json rec;
    {
        no_grad guard;
        rec = evaluate(step_, final);
    }
    if (!rec.is_null() && is_root()) meter_->record(step_, rec);
    model_.train();
}

}  // namespace depthlab::train
