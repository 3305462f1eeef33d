#pragma once
// Reader for the text fixtures written by scripts/make_fixtures.py (PyTorch reference
// values). Format, one tensor per two lines:
//     NAME DTYPE D0 D1 ...      shape ('-' alone for a scalar); DTYPE is f64, f32 or i64
//     V0 V1 ...                 numel values, row-major ('%.17g'; inf/-inf/nan allowed)
// Lines starting with '#' and blank lines between tensors are ignored. Every value is
// returned as a double (f32 values were widened exactly; i64 ids are small).
// Errors (missing file, bad header, wrong value count, duplicate name, unknown tensor)
// throw std::runtime_error naming the file and, where it applies, the line.
#include <charconv>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace depthlab_test {

struct FixtureTensor {
    std::string dtype;                // "f64", "f32" or "i64"
    std::vector<std::int64_t> shape;  // empty for a scalar
    std::vector<double> values;       // row-major

    [[nodiscard]] std::int64_t numel() const {
        std::int64_t n = 1;
        for (std::int64_t d : shape) n *= d;
        return n;
    }
    [[nodiscard]] std::string shape_string() const {
        std::string s = "(";
        for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
        return s + (shape.size() == 1 ? ",)" : ")");
    }
};

/// name -> tensor, plus the file it came from (for error messages).
struct Fixture : std::map<std::string, FixtureTensor> {
    std::string path;

    /// The tensor called `name`; throws naming the file and the names it does hold.
    [[nodiscard]] const FixtureTensor& get(const std::string& name) const {
        const auto it = find(name);
        if (it != end()) return it->second;
        std::string have;
        for (const auto& [k, v] : *this) have += (have.empty() ? "" : ", ") + k;
        throw std::runtime_error("fixture " + path + ": no tensor named '" + name + "' (has: " + have + ")");
    }
};

namespace detail {
[[noreturn]] inline void fixture_fail(const std::string& path, std::size_t line, const std::string& what) {
    throw std::runtime_error("fixture " + path + ":" + std::to_string(line) + ": " + what +
                             " (regenerate with /usr/bin/python3 scripts/make_fixtures.py)");
}
inline std::vector<std::string> fixture_tokens(const std::string& line) {
    std::istringstream is(line);
    std::vector<std::string> out;
    for (std::string t; is >> t;) out.push_back(t);
    return out;
}
/// Whole-token number parse (locale independent; accepts inf, -inf, nan).
inline bool fixture_number(const std::string& tok, double& out) {
    const char* first = tok.data();
    const char* last = tok.data() + tok.size();
    if (first != last && *first == '+') ++first;
    const auto [ptr, ec] = std::from_chars(first, last, out);
    return ec == std::errc() && ptr == last;
}
}  // namespace detail

/// Parses a fixture file; see the format above.
inline Fixture load_fixture(const std::string& path) {
    std::ifstream in(path);
    if (!in)
        throw std::runtime_error("fixture " + path +
                                 ": cannot open file (generate it with /usr/bin/python3 scripts/make_fixtures.py; "
                                 "the directory comes from DEPTHLAB_FIXTURE_DIR)");
    Fixture fx;
    fx.path = path;
    std::string line;
    std::size_t lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        const auto head = detail::fixture_tokens(line);
        if (head.empty() || head[0][0] == '#') continue;
        if (head.size() < 3) detail::fixture_fail(path, lineno, "expected 'NAME DTYPE D0 D1 ...' (or 'NAME DTYPE -'), got '" + line + "'");
        FixtureTensor t;
        const std::string& name = head[0];
        t.dtype = head[1];
        if (t.dtype != "f64" && t.dtype != "f32" && t.dtype != "i64")
            detail::fixture_fail(path, lineno, "tensor '" + name + "': unknown dtype '" + t.dtype + "' (f64, f32 or i64)");
        if (!(head.size() == 3 && head[2] == "-")) {
            for (std::size_t i = 2; i < head.size(); ++i) {
                double d = -1;
                if (!detail::fixture_number(head[i], d) || d < 0 || d != static_cast<double>(static_cast<std::int64_t>(d)))
                    detail::fixture_fail(path, lineno, "tensor '" + name + "': bad extent '" + head[i] + "'");
                t.shape.push_back(static_cast<std::int64_t>(d));
            }
        }
        if (fx.count(name)) detail::fixture_fail(path, lineno, "tensor '" + name + "' appears twice");
        const std::size_t header_line = lineno;
        if (!std::getline(in, line)) detail::fixture_fail(path, header_line, "tensor '" + name + "': missing value line");
        ++lineno;
        for (const std::string& tok : detail::fixture_tokens(line)) {
            double v = 0;
            if (!detail::fixture_number(tok, v))
                detail::fixture_fail(path, lineno, "tensor '" + name + "': bad value '" + tok + "'");
            t.values.push_back(v);
        }
        if (static_cast<std::int64_t>(t.values.size()) != t.numel())
            detail::fixture_fail(path, lineno, "tensor '" + name + "' of shape " + t.shape_string() + " needs " +
                                                   std::to_string(t.numel()) + " values, got " + std::to_string(t.values.size()));
        fx.emplace(name, std::move(t));
    }
    if (fx.empty()) throw std::runtime_error("fixture " + path + ": no tensors in file");
    return fx;
}

}  // namespace depthlab_test
