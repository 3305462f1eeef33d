#pragma once
// The one CSV writer every table of the library goes through (analysis results, traces,
// halting statistics): a header line, then rows with exactly as many fields, "," separated,
// RFC 4180 quoting (a field with , " CR or LF is quoted, " doubled), numbers in their
// shortest round-trip form ("nan", "inf", "-inf" for non-finite values), "\n" line ends,
// and the file written atomically (io/atomic_file.hpp).
//
//   io::csv_writer csv({"module", "alpha", "metric"});
//   for (const auto& [a, m] : trace) csv.row(name, a, m);
//   csv.write(out + "/criticality_trace.csv");
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "depthlab/core/error.hpp"
#include "depthlab/io/atomic_file.hpp"

namespace depthlab::io {

/// Shortest text that reads back to exactly v.
inline std::string csv_number(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, res.ptr);
}
/// A text field, quoted when it has to be.
inline std::string csv_field(std::string_view s) {
    if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
    std::string q = "\"";
    for (char c : s) {
        if (c == '"') q += '"';
        q += c;
    }
    return q + "\"";
}

class csv_writer {
public:
    explicit csv_writer(std::vector<std::string> columns) : columns_(std::move(columns)) {
        DEPTHLAB_CHECK(!columns_.empty(), usage_error, "csv_writer: no columns");
        std::vector<std::string> header;
        for (const auto& c : columns_) header.push_back(csv_field(c));
        append_line(header);
    }
    /// One row: strings are quoted as needed, integers written as is, floating-point numbers
    /// in shortest round-trip form. usage_error unless there is one field per column.
    template <class... Fields>
    csv_writer& row(const Fields&... fields) {
        return append_row({text(fields)...});
    }
    /// One row of text fields (a number already formatted, e.g. by csv_number, stays as is),
    /// for rows assembled at run time.
    csv_writer& row(const std::vector<std::string>& fields) {
        std::vector<std::string> quoted;
        for (const auto& f : fields) quoted.push_back(csv_field(f));
        return append_row(quoted);
    }
    [[nodiscard]] std::size_t rows() const { return rows_; }
    [[nodiscard]] const std::string& str() const { return text_; }
    void write(std::ostream& os) const { os << text_; }
    /// Atomically: the file is the old table or the new one, never a part; io_error names the path.
    void write(const std::string& path) const { write_file_atomically(path, text_, "CSV: write"); }

private:
    template <class V>
    static std::string text(const V& v) {
        if constexpr (std::is_same_v<V, bool>) {
            return v ? "true" : "false";
        } else if constexpr (std::is_integral_v<V>) {
            return std::to_string(v);
        } else if constexpr (std::is_floating_point_v<V>) {
            return csv_number(static_cast<double>(v));
        } else {
            static_assert(std::is_convertible_v<const V&, std::string_view>, "csv_writer: a field must be text or a number");
            return csv_field(std::string_view(v));
        }
    }
    // one row of fields as written (quoted as needed); usage_error unless one per column
    csv_writer& append_row(const std::vector<std::string>& fields) {
        DEPTHLAB_CHECK(fields.size() == columns_.size(), usage_error, "csv_writer: a row of ", fields.size(), " fields for ", columns_.size(),
                       " columns (", columns_.front(), ", ...)");
        append_line(fields);
        ++rows_;
        return *this;
    }
    void append_line(const std::vector<std::string>& fields) {
        for (std::size_t i = 0; i < fields.size(); ++i) {
            if (i) text_ += ',';
            text_ += fields[i];
        }
        text_ += '\n';
    }

    std::vector<std::string> columns_;
    std::string text_;
    std::size_t rows_ = 0;
};

}  // namespace depthlab::io
