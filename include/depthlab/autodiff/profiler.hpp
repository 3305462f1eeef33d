#pragma once
// Where the time of a step goes, op by op: the op table of torch.profiler, coarse and cheap.
//
//   {
//       depthlab::op_profiler prof;             // active on this thread while it lives
//       auto loss = model.loss(batch);          // each op result: its forward time
//       loss.backward();                        // each node's backward function: its backward time
//       depthlab::profile_mark("optimizer");    // the time since the last event, under a label
//       opt.step();
//       std::fputs(prof.table().c_str(), stdout);
//   }
//
// A line is an op kind in one phase and, when the op reads a parameter (a leaf that takes
// gradients), the shape of the first one: each linear layer of a model gets its own line
// ("linear [1024, 256]"), and a weight-tied layer one line for all its uses.
//
// The ops are coarse (a linear layer is one op, GEMM and bias included), so the clock is read
// at op boundaries only. A forward op is charged the wall time since the previous event (the
// previous op's result, a mark, or the profiler's start): its own work plus any host code
// run just before it, so code between ops is either marked by the caller (profile_mark; the
// trainer and the data samplers mark theirs) or lands on the next op. A backward function is
// charged its own run, with the release of what its op saved. Work that other threads do for
// an op (OpenMP, oneDNN) is inside its wall time. On a GPU backend the times are the host's
// (launches, synchronisations), not the kernels'.
//
// Without an active profiler an op pays one thread-local load and a null test.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "depthlab/autodiff/op_kind.hpp"

namespace depthlab {

class op_profiler {
public:
    using clock = std::chrono::steady_clock;
    /// One line of the table: an op kind in one phase, or a marked label.
    struct row {
        std::string name;   // op_name(kind) [+ " [parameter shape]"], or the label given to profile_mark
        std::string phase;  // "forward", "backward" or "other" (marks)
        std::int64_t calls = 0;
        double seconds = 0;
    };

    /// Becomes this thread's active profiler; the one it replaces is active again after it.
    op_profiler() : outer_(slot()), start_(clock::now()), last_(start_) { slot() = this; }
    ~op_profiler() { slot() = outer_; }
    op_profiler(const op_profiler&) = delete;
    op_profiler& operator=(const op_profiler&) = delete;

    /// This thread's active profiler, or null.
    [[nodiscard]] static op_profiler* active() { return slot(); }

    /// Charges the time since the last event to `label`.
    void mark(std::string_view label) {
        if (!paused_) charge(other(label));
    }
    /// Until resume(), nothing is charged (an evaluation, a checkpoint: not part of a step).
    void pause() { paused_ = true; }
    void resume() {
        paused_ = false;
        last_ = clock::now();
    }

    // ---- hooks: make_result (every op result) and Var::backward; `parameter`: the shape of
    // the first parameter the op reads (empty: none)
    void forward_done(op_kind k, std::span<const std::int64_t> parameter = {}) {
        if (!in_backward_ && !paused_) charge(op_slot(k, false, parameter));  // (ops a backward function runs are part of it)
    }
    void backward_begins() {
        mark("(host code before backward)");
        in_backward_ = true;
    }
    void backward_done(op_kind k, std::span<const std::int64_t> parameter = {}) {
        if (!paused_) charge(op_slot(k, true, parameter));
    }
    void backward_ends() { in_backward_ = false; }

    /// Every charged line, the longest first.
    [[nodiscard]] std::vector<row> rows() const {
        std::vector<row> out;
        for (const auto& [key, s] : ops_) {
            std::string name = op_name(key.op);
            if (key.rank > 0) {
                name += " [";
                for (int i = 0; i < key.rank; ++i) name += (i ? ", " : "") + std::to_string(key.dims[static_cast<std::size_t>(i)]);
                name += "]";
            }
            out.push_back({std::move(name), key.backward ? "backward" : "forward", s.calls, s.seconds});
        }
        for (const auto& [label, s] : others_) out.push_back({label, "other", s.calls, s.seconds});
        std::stable_sort(out.begin(), out.end(), [](const row& a, const row& b) { return a.seconds > b.seconds; });
        return out;
    }
    /// The time charged to some line (events up to the last one).
    [[nodiscard]] double seconds() const {
        double s = 0;
        for (const auto& [key, t] : ops_) s += t.seconds;
        for (const auto& [label, t] : others_) s += t.seconds;
        return s;
    }
    /// Wall time since the profiler started.
    [[nodiscard]] double wall_seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }

    /// The table as text: per line calls, milliseconds per step (`steps` steps profiled) and
    /// the share of the charged time; the `top` longest lines (0: all), the rest summed.
    [[nodiscard]] std::string table(std::int64_t steps = 1, std::size_t top = 0) const {
        const std::vector<row> all = rows();
        const double total = seconds(), per = 1e3 / static_cast<double>(std::max<std::int64_t>(steps, 1));
        std::string out;
        char line[192];
        std::snprintf(line, sizeof line, "  %-32s %-8s %9s %10s %6s\n", "op / label", "phase", "calls", "ms/step", "share");
        out += line;
        double rest = 0;
        std::int64_t rest_lines = 0;
        for (std::size_t i = 0; i < all.size(); ++i) {
            if (top > 0 && i >= top) {
                rest += all[i].seconds;
                ++rest_lines;
                continue;
            }
            std::snprintf(line, sizeof line, "  %-32.32s %-8s %9lld %10.3f %5.1f%%\n", all[i].name.c_str(), all[i].phase.c_str(),
                          static_cast<long long>(all[i].calls), all[i].seconds * per, total > 0 ? 100.0 * all[i].seconds / total : 0.0);
            out += line;
        }
        if (rest_lines > 0) {
            std::snprintf(line, sizeof line, "  %-32s %-8s %9s %10.3f %5.1f%%\n", ("(" + std::to_string(rest_lines) + " more lines)").c_str(), "", "",
                          rest * per, total > 0 ? 100.0 * rest / total : 0.0);
            out += line;
        }
        std::snprintf(line, sizeof line, "  %-32s %-8s %9s %10.3f\n", "total", "", "", total * per);
        return out + line;
    }

private:
    struct slot_time {
        double seconds = 0;
        std::int64_t calls = 0;
    };
    static op_profiler*& slot() {
        thread_local op_profiler* p = nullptr;
        return p;
    }
    struct op_key {
        op_kind op;
        bool backward;
        int rank;
        std::array<std::int64_t, 8> dims;
        bool operator<(const op_key& o) const {
            if (op != o.op) return op < o.op;
            if (backward != o.backward) return backward < o.backward;
            if (rank != o.rank) return rank < o.rank;
            return dims < o.dims;
        }
    };
    slot_time& op_slot(op_kind k, bool backward, std::span<const std::int64_t> parameter) {
        op_key key{k, backward, static_cast<int>(std::min<std::size_t>(parameter.size(), 8)), {}};
        std::copy_n(parameter.begin(), key.rank, key.dims.begin());
        return ops_[key];
    }
    slot_time& other(std::string_view label) {
        for (auto& [l, s] : others_)
            if (l == label) return s;
        return others_.emplace_back(std::string(label), slot_time{}).second;
    }
    void charge(slot_time& s) {
        if (paused_) return;
        const clock::time_point now = clock::now();
        s.seconds += std::chrono::duration<double>(now - last_).count();
        ++s.calls;
        last_ = now;
    }

    op_profiler* outer_;
    clock::time_point start_, last_;
    bool in_backward_ = false, paused_ = false;
    std::map<op_key, slot_time> ops_;
    std::vector<std::pair<std::string, slot_time>> others_;
};

/// Charges the time since the last event to `label` in this thread's active profiler (if any).
inline void profile_mark(std::string_view label) {
    if (op_profiler* p = op_profiler::active()) p->mark(label);
}

}  // namespace depthlab
