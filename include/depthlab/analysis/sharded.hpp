#pragma once
// The component-value analyses with their modules split across the ranks of a
// dist::communicator (one model copy per rank, module i on rank i mod W), the results
// gathered on every rank: the same contribution_result / criticality_result, entry for entry
// and bit for bit, as contribution() / criticality() in one process, since every module's
// evaluations are independent and the metric is deterministic. Each rank computes the
// baseline itself (unless options.base gives it); `evaluations` counts every rank's calls.
// The gathers wait for the slowest rank: ranks whose modules take much longer than the
// others' (ablated models decoding to the length limit) may need DEPTHLAB_DIST_TIMEOUT raised.
//
//     dist::communicator& comm = dist::world(&argc, &argv);
//     const auto contrib = analysis::contribution(comm, modules, metric, copt);   // every rank
//     if (comm.is_root()) analysis::write_contribution_csv(...);
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "depthlab/analysis/scores.hpp"
#include "depthlab/dist/communicator.hpp"
#include "depthlab/dist/gather.hpp"

namespace depthlab::analysis {

namespace detail {
// Doubles travel as their bits: exact, and NaN (a module whose removal breaks the metric) survives.
inline std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }
inline double real(const nlohmann::json& j) { return std::bit_cast<double>(j.get<std::uint64_t>()); }

/// This rank's modules (round-robin) and, for the gather, their positions.
inline std::vector<module_ref> modules_of_rank(const std::vector<module_ref>& modules, const dist::communicator& comm) {
    std::vector<module_ref> mine;
    for (std::size_t i = 0; i < modules.size(); ++i)
        if (dist::owner_of(i, comm) == comm.rank()) mine.push_back(modules[i]);
    return mine;
}
/// Every rank's entries (JSON arrays, one per module, in the rank's order) back in module order.
inline std::vector<nlohmann::json> gather_entries(dist::communicator& comm, const nlohmann::json& mine, std::size_t total) {
    const std::vector<std::string> parts = dist::all_gather_bytes(comm, mine.dump());
    std::vector<nlohmann::json> per_rank;
    for (const auto& p : parts) per_rank.push_back(nlohmann::json::parse(p));
    std::vector<nlohmann::json> out(total);
    for (std::size_t i = 0; i < total; ++i) {
        const int r = dist::owner_of(i, comm);
        out[i] = per_rank[static_cast<std::size_t>(r)].at(i / static_cast<std::size_t>(comm.size()));
    }
    return out;
}
inline double shared_baseline(const metric_fn& metric, const std::optional<double>& given, std::size_t& evaluations) {
    if (given) return *given;
    no_grad guard;
    ++evaluations;
    const double base = metric();  // (the same on every rank: a NaN throws on all of them)
    DEPTHLAB_CHECK(!std::isnan(base), numeric_error, "sharded analysis: the baseline metric is NaN");
    return base;
}
}  // namespace detail

/// contribution() with the modules split across comm's ranks; the full result on every rank.
inline contribution_result contribution(dist::communicator& comm, const std::vector<module_ref>& modules, const metric_fn& metric,
                                        contribution_options opts = {}) {
    if (!comm.distributed()) return contribution(modules, metric, opts);
    detail::check_modules(modules, "contribution", true, detail::parameters_needed::none);
    detail::check_options(opts);  // (on every rank, also one without modules: all throw or none)
    for (const auto& m : modules) check_ablation(m, opts.ablation);
    std::size_t own_evaluations = 0;
    opts.base = detail::shared_baseline(metric, opts.base, own_evaluations);
    const std::vector<module_ref> mine = detail::modules_of_rank(modules, comm);
    nlohmann::json out = nlohmann::json::array();
    contribution_result part;
    if (!mine.empty()) {
        part = contribution(mine, metric, opts);
        for (const auto& e : part.modules) out.push_back({detail::bits(e.metric_without), detail::bits(e.drop)});
    }
    own_evaluations += part.evaluations;
    contribution_result r;
    r.ablation = opts.ablation;
    r.base = *opts.base;
    r.clip = opts.clip ? *opts.clip : opts.clip_fraction * std::abs(r.base);
    const std::vector<nlohmann::json> all = detail::gather_entries(comm, out, modules.size());
    for (std::size_t i = 0; i < modules.size(); ++i)
        r.modules.push_back({modules[i].name, modules[i].type, modules[i].layer, detail::real(all[i][0]), detail::real(all[i][1]), 0.0});
    detail::score_contributions(r);
    auto count = static_cast<std::int64_t>(own_evaluations);
    comm.host_side().all_reduce(&count, 1);
    r.evaluations = static_cast<std::size_t>(count);
    return r;
}

/// criticality() with the modules split across comm's ranks; the full result on every rank.
template <class T, class B>
criticality_result criticality(dist::communicator& comm, nn::Module<T, B>& model, const std::vector<module_ref>& modules,
                               const nn::Snapshot<T, B>& initial, const nn::Snapshot<T, B>& final_, const metric_fn& metric,
                               criticality_options opts = {}) {
    if (!comm.distributed()) return criticality(model, modules, initial, final_, metric, opts);
    detail::check_modules(modules, "criticality", false, detail::parameters_needed::prefix_or_interpolation);
    detail::check_options(opts);
    std::size_t own_evaluations = 0;
    opts.base = detail::shared_baseline(metric, opts.base, own_evaluations);
    const std::vector<module_ref> mine = detail::modules_of_rank(modules, comm);
    nlohmann::json out = nlohmann::json::array();
    criticality_result part;
    if (!mine.empty()) {
        part = criticality(model, mine, initial, final_, metric, opts);
        for (const auto& e : part.modules) {
            nlohmann::json trace = nlohmann::json::array();
            for (const auto& [a, v] : e.trace) trace.push_back({detail::bits(a), detail::bits(v)});
            out.push_back({detail::bits(e.alpha), detail::bits(e.metric_at_alpha), e.found, std::move(trace)});
        }
    }
    own_evaluations += part.evaluations;
    criticality_result r;
    r.base = *opts.base;
    r.epsilon = opts.epsilon;
    const std::vector<nlohmann::json> all = detail::gather_entries(comm, out, modules.size());
    for (std::size_t i = 0; i < modules.size(); ++i) {
        criticality_entry e{modules[i].name, modules[i].type, modules[i].layer, detail::real(all[i][0]), detail::real(all[i][1]),
                            to_string(opts.method), all[i][2].get<bool>(), {}};
        for (const auto& p : all[i][3]) e.trace.emplace_back(detail::real(p[0]), detail::real(p[1]));
        r.modules.push_back(std::move(e));
    }
    auto count = static_cast<std::int64_t>(own_evaluations);
    comm.host_side().all_reduce(&count, 1);
    r.evaluations = static_cast<std::size_t>(count);
    return r;
}

}  // namespace depthlab::analysis
