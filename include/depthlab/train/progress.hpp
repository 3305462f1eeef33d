#pragma once
// Progress of a long run, the way a PyTorch / Hugging Face user expects it: one line per
// report with step, loss parts, tokens/s, elapsed time and ETA, and the same record as a
// JSON line (metrics.jsonl) for plots.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "depthlab/core/error.hpp"
#include "depthlab/core/out_of_line.hpp"
#include "depthlab/io/atomic_file.hpp"

namespace depthlab::train {

/// "1h02m", "3m05s", "12.3s"
inline std::string format_duration(double seconds) {
    char buf[32];
    if (!(seconds >= 0) || seconds > 1e8) return "?";
    if (seconds >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(seconds / 3600), static_cast<int>(seconds / 60) % 60);
    else if (seconds >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds / 60), static_cast<int>(seconds) % 60);
    else std::snprintf(buf, sizeof buf, "%.1fs", seconds);
    return buf;
}

/// Keeps the records of a metrics.jsonl whose "step" is <= last_step, in order, and drops
/// the rest: later steps, and lines that are not a JSON object with an integer "step" (the
/// torn last line of a killed run). Rewritten atomically (temporary file, fsync, rename);
/// a missing file is left missing. Returns the number of records dropped.
std::size_t truncate_jsonl(const std::string& path, std::int64_t last_step);

/// The records of a metrics.jsonl, for plots and summaries: series(key) is every
/// (step, value) where the record has a number under key, in file order. A missing file
/// reads as no records; lines that are not JSON objects with an integer "step" are skipped.
struct metrics_log {
    std::vector<nlohmann::json> records;
    [[nodiscard]] std::vector<std::pair<std::int64_t, double>> series(const std::string& key) const;
    /// The value of key in the last record that has it; `fallback` when none has.
    [[nodiscard]] double last(const std::string& key, double fallback = 0) const {
        const auto s = series(key);
        return s.empty() ? fallback : s.back().second;
    }
};
/// Reads a metrics.jsonl (see metrics_log).
metrics_log read_metrics_log(const std::string& path);

class progress_meter {
public:
    /// total_steps: for the ETA; first_step: where a resumed run starts (rates count only
    /// the steps of this process); jsonl_path: empty for no file. An existing file is cut
    /// back to the records of steps <= first_step (see truncate_jsonl): the steps a killed
    /// run logged after its last checkpoint are run again, and must not appear twice.
    progress_meter(std::int64_t total_steps, std::int64_t first_step = 0, const std::string& jsonl_path = "")
        : total_(total_steps), first_(first_step), start_(clock::now()) {
        if (!jsonl_path.empty()) {
            truncate_jsonl(jsonl_path, first_step);
            jsonl_.open(jsonl_path, std::ios::app);
            DEPTHLAB_CHECK(jsonl_.good(), io_error, "progress_meter: cannot open ", jsonl_path, " for writing");
        }
    }
    /// A time budget that ends the run `seconds` after construction: the ETA is then the
    /// sooner of the steps' and the budget's end.
    void set_deadline(double seconds) { deadline_ = seconds; }
    /// Counts tokens processed (for tokens/s).
    void add_tokens(std::int64_t n) { tokens_ += n; }

    /// Prints one line and appends one JSON record: step, the named values, rates, times.
    void report(std::int64_t step, const std::vector<std::pair<std::string, double>>& values, std::FILE* out = stdout);
    /// Appends one record {"step": step, fields...} to metrics.jsonl without printing (e.g.
    /// an evaluation's nested tables); fields must be a JSON object.
    void record(std::int64_t step, const nlohmann::ordered_json& fields);
    [[nodiscard]] double elapsed_seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
    /// Tokens counted by add_tokens per second since construction.
    [[nodiscard]] double tokens_per_second() const {
        const double e = elapsed_seconds();
        return e > 0 ? static_cast<double>(tokens_) / e : 0.0;
    }

private:
    using clock = std::chrono::steady_clock;
    void write_record(const nlohmann::ordered_json& j);
    std::int64_t total_, first_;
    std::int64_t tokens_ = 0;
    double deadline_ = 0;  // seconds after start_ (0: none)
    clock::time_point start_;
    std::ofstream jsonl_;
};

// Defined outside their classes: under DEPTHLAB_COMPILED a program links the library's copies
// and does not compile the JSON parser and serializer again (include/depthlab/core/out_of_line.hpp).
#if DEPTHLAB_DEFINE_OUT_OF_LINE
DEPTHLAB_OUT_OF_LINE std::size_t truncate_jsonl(const std::string& path, std::int64_t last_step) {
    std::ifstream in(path);
    if (!in.is_open()) return 0;
    std::string kept, line;
    std::size_t dropped = 0;
    while (std::getline(in, line)) {
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        const bool keep = j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<std::int64_t>() <= last_step;
        if (keep) kept += line + "\n";
        else ++dropped;
    }
    in.close();
    if (dropped == 0) return 0;
    io::write_file_atomically(path, kept);
    return dropped;
}

DEPTHLAB_OUT_OF_LINE std::vector<std::pair<std::int64_t, double>> metrics_log::series(const std::string& key) const {
    std::vector<std::pair<std::int64_t, double>> out;
    for (const auto& j : records)
        if (j.contains(key) && j[key].is_number()) out.emplace_back(j["step"].get<std::int64_t>(), j[key].get<double>());
    return out;
}

DEPTHLAB_OUT_OF_LINE metrics_log read_metrics_log(const std::string& path) {
    metrics_log log;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_object() && j.contains("step") && j["step"].is_number_integer()) log.records.push_back(std::move(j));
    }
    return log;
}

DEPTHLAB_OUT_OF_LINE void progress_meter::report(std::int64_t step, const std::vector<std::pair<std::string, double>>& values, std::FILE* out) {
    const double elapsed = std::chrono::duration<double>(clock::now() - start_).count();
    const double done = static_cast<double>(step - first_);
    double eta = done > 0 ? elapsed / done * static_cast<double>(total_ - step) : -1;
    if (deadline_ > 0) {
        const double left = std::max(0.0, deadline_ - elapsed);
        eta = eta < 0 ? left : std::min(eta, left);
    }
    const double tps = elapsed > 0 ? static_cast<double>(tokens_) / elapsed : 0;
    std::ostringstream line;
    line << "step " << step << "/" << total_;
    for (const auto& [k, v] : values) line << "  " << k << " " << std::setprecision(4) << std::fixed << v;
    line << "  " << std::setprecision(0) << std::fixed << tps << " tok/s  elapsed " << format_duration(elapsed) << "  ETA "
         << format_duration(eta);
    std::fprintf(out, "%s\n", line.str().c_str());
    std::fflush(out);
    if (jsonl_.is_open()) {
        nlohmann::ordered_json j;
        j["step"] = step;
        for (const auto& [k, v] : values) j[k] = v;  // NaN and inf become null (JSON has neither)
        j["tokens_per_s"] = tps;
        j["elapsed_s"] = elapsed;
        write_record(j);
    }
}

DEPTHLAB_OUT_OF_LINE void progress_meter::record(std::int64_t step, const nlohmann::ordered_json& fields) {
    DEPTHLAB_CHECK(fields.is_object(), usage_error, "progress_meter::record: fields must be a JSON object, got ", fields.type_name());
    if (!jsonl_.is_open()) return;
    nlohmann::ordered_json j;
    j["step"] = step;
    for (const auto& [k, v] : fields.items()) j[k] = v;
    write_record(j);
}

DEPTHLAB_OUT_OF_LINE void progress_meter::write_record(const nlohmann::ordered_json& j) {
    jsonl_ << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";  // invalid UTF-8 in a key: U+FFFD
    jsonl_.flush();
    DEPTHLAB_CHECK(jsonl_.good(), io_error, "progress_meter: write to metrics.jsonl failed");
}
#endif  // DEPTHLAB_DEFINE_OUT_OF_LINE

}  // namespace depthlab::train
