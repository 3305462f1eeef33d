#pragma once
// html_page (depthlab/report): one self-contained HTML page built block by block —
// sections (with a contents list), paragraphs, notes, preformatted text, key-value
// tables, tables (table_options), numbered figures, trusted raw HTML, a provenance
// footer — with its built-in style sheet (default_css), and write(), which writes the
// page atomically through report::write_file_atomically (io/atomic_file.hpp).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "depthlab/io/atomic_file.hpp"
#include "depthlab/report/text.hpp"

namespace depthlab::report {

// ------------------------------------------------------------------------------------
// Files
// ------------------------------------------------------------------------------------

/// Writes `content` to `path` atomically (io/atomic_file.hpp: temporary file, fsync,
/// rename; a reader sees the old file or the new one). Throws io_error (a std::runtime_error)
/// naming the path; `path` is then untouched and no temporary is left.
inline void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
    io::write_file_atomically(path.string(), content, "depthlab::report: write");
}

// ------------------------------------------------------------------------------------
// html_page
// ------------------------------------------------------------------------------------

struct table_options {
    std::string caption{};                      // shown as "Table n. caption"
    int decimals = -1;                          // >= 0: cells that are numbers are reprinted with these decimals
    std::optional<std::size_t> highlight_column{};  // tinted column (e.g. "ours")
};

/// The page's built-in style sheet (system fonts; light; print-friendly).
inline constexpr const char* default_css = R"css(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #ffffff; color: #1f2328;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", "DejaVu Sans", sans-serif;
  font-size: 16px; line-height: 1.55; -webkit-text-size-adjust: 100%; }
main { max-width: 960px; margin: 0 auto; padding: 36px 28px 24px; }
header.title { border-bottom: 2px solid #1f2328; padding-bottom: 12px; margin-bottom: 8px; }
h1 { font-size: 1.85rem; line-height: 1.2; margin: 0; font-weight: 650; letter-spacing: -0.01em; }
header.title p.subtitle { color: #57606a; margin: 6px 0 0; font-size: 1.05rem; }
h2 { font-size: 1.35rem; margin: 2.4rem 0 0.7rem; padding-bottom: 0.3rem; border-bottom: 1px solid #d0d7de; font-weight: 620; }
h3 { font-size: 1.1rem; margin: 1.6rem 0 0.5rem; font-weight: 620; }
p { margin: 0.65rem 0; }
nav.toc { margin: 14px 0 4px; font-size: 0.95rem; }
nav.toc ol { margin: 4px 0; padding-left: 1.4rem; columns: 2; column-gap: 2.5rem; }
nav.toc a { color: #0550ae; text-decoration: none; }
nav.toc a:hover { text-decoration: underline; }
.note { background: #fff8e6; border-left: 4px solid #e69f00; padding: 8px 12px; margin: 14px 0; border-radius: 0 6px 6px 0; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: 10px 12px; overflow-x: auto;
  font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace;
  font-size: 0.84rem; line-height: 1.45; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace; font-size: 0.88em; }
.table-wrap { overflow-x: auto; margin: 1rem 0 1.3rem; }
table { border-collapse: collapse; font-size: 0.92rem; font-variant-numeric: tabular-nums; }
.table-wrap .caption { color: #57606a; font-size: 0.9rem; padding-bottom: 6px; }
.caption b, figcaption b { color: #1f2328; }
th, td { padding: 5px 12px; text-align: left; vertical-align: top; }
thead th { border-bottom: 2px solid #1f2328; font-weight: 620; white-space: nowrap; }
tbody tr { border-bottom: 1px solid #e4e7eb; }
tbody tr:last-child { border-bottom: 1px solid #8c959f; }
tbody tr:nth-child(even) { background: #f9fafb; }
td.num, th.num { text-align: right; }
.hl { background: #e8f1fb; }
tbody tr:nth-child(even) .hl { background: #dde9f7; }
thead th.hl { background: #d6e6f7; }
table.kv th { font-weight: 600; color: #3d444d; white-space: nowrap; }
figure { margin: 1.4rem 0 1.8rem; }
figure svg { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { color: #57606a; font-size: 0.9rem; margin-top: 6px; text-align: center; }
footer { max-width: 960px; margin: 2.5rem auto 0; padding: 12px 28px 32px; border-top: 1px solid #d0d7de; color: #57606a; font-size: 0.85rem; }
footer code { white-space: pre-wrap; word-break: break-all; color: #3d444d; }
@media print {
  body { font-size: 11pt; }
  main, footer { max-width: none; padding-left: 0; padding-right: 0; }
  nav.toc { display: none; }
  h2, h3 { break-after: avoid; page-break-after: avoid; }
  figure, .table-wrap, pre, .note { break-inside: avoid; page-break-inside: avoid; }
  pre { white-space: pre-wrap; word-break: break-word; }
  tbody tr:nth-child(even) { background: none; }
  a { color: inherit; text-decoration: none; }
}
)css";

/// One self-contained HTML page built block by block (in call order). Text arguments are
/// escaped; figure() takes SVG from the builders above (trusted, inserted as is).
class html_page {
public:
    explicit html_page(std::string title, std::string subtitle = {}) : title_(std::move(title)), subtitle_(std::move(subtitle)) {}

    /// A section heading (h2), listed in the contents when the page has three or more.
    html_page& section(std::string_view heading) {
        sections_.emplace_back(heading);
        const std::string id = "s" + std::to_string(sections_.size());
        blocks_.push_back("<h2 id=\"" + id + "\">" + escape(heading) + "</h2>");
        return *this;
    }
    /// A sub-heading (h3).
    html_page& subsection(std::string_view heading) {
        blocks_.push_back("<h3>" + escape(heading) + "</h3>");
        return *this;
    }
    /// A paragraph of plain text (escaped; blank lines start new paragraphs).
    html_page& paragraph(std::string_view text) {
        std::size_t start = 0;
        while (start <= text.size()) {
            std::size_t end = text.find("\n\n", start);
            if (end == std::string_view::npos) end = text.size();
            const std::string_view part = text.substr(start, end - start);
            if (part.find_first_not_of(" \t\n") != std::string_view::npos) blocks_.push_back("<p>" + escape(part) + "</p>");
            start = end + 2;
        }
        return *this;
    }
    /// A highlighted remark (e.g. "demo data", a caveat).
    html_page& note(std::string_view text) {
        blocks_.push_back("<p class=\"note\">" + escape(text) + "</p>");
        return *this;
    }
    /// Preformatted text (logs, command lines, configurations), escaped.
    html_page& preformatted(std::string_view text) {
        blocks_.push_back("<pre>" + escape(text) + "</pre>");
        return *this;
    }
    /// A two-column key–value table (settings, summary numbers).
    html_page& key_values(const std::vector<std::pair<std::string, std::string>>& rows, std::string_view caption = {}) {
        std::string h = "<div class=\"table-wrap\">" + caption_html(caption) + "<table class=\"kv\"><tbody>";
        for (const auto& [k, v] : rows) {
            h += "<tr><th scope=\"row\">" + escape(k) + "</th><td>" + escape(v) + "</td></tr>";
        }
        h += "</tbody></table></div>";
        blocks_.push_back(std::move(h));
        return *this;
    }
    /// A table: header and rows of strings. Cells that are numbers are right-aligned (and,
    /// with decimals >= 0, reprinted with that many decimals; NaN reads "n/a"). Short rows
    /// are padded; a row longer than a non-empty header throws std::invalid_argument.
    html_page& table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                     const table_options& opt = {}) {
        std::size_t ncol = header.size();
        for (const auto& r : rows) {
            detail::check(header.empty() || r.size() <= header.size(),
                          "html_page::table: a row has " + std::to_string(r.size()) + " cells for " +
                              std::to_string(header.size()) + " columns");
            ncol = std::max(ncol, r.size());
        }
        // A column is numeric when all its non-empty cells are.
        std::vector<bool> numeric(ncol, true);
        std::vector<bool> seen(ncol, false);
        for (const auto& r : rows)
            for (std::size_t c = 0; c < r.size(); ++c) {
                double x = 0;
                if (r[c].empty()) continue;
                seen[c] = true;
                if (!detail::parse_number(r[c], x)) numeric[c] = false;
            }
        for (std::size_t c = 0; c < ncol; ++c) numeric[c] = numeric[c] && seen[c];
        auto cls = [&](std::size_t c) {
            std::string k;
            if (numeric[c]) k = "num";
            if (opt.highlight_column && *opt.highlight_column == c) k += k.empty() ? "hl" : " hl";
            return k.empty() ? std::string() : " class=\"" + k + "\"";
        };
        std::string h = "<div class=\"table-wrap\">" + caption_html(opt.caption) + "<table>";
        if (!header.empty()) {
            h += "<thead><tr>";
            for (std::size_t c = 0; c < header.size(); ++c) h += "<th" + cls(c) + ">" + escape(header[c]) + "</th>";
            h += "</tr></thead>";
        }
        h += "<tbody>";
        for (const auto& r : rows) {
            h += "<tr>";
            for (std::size_t c = 0; c < ncol; ++c) {
                std::string cell = c < r.size() ? r[c] : std::string();
                double x = 0;
                if (opt.decimals >= 0 && detail::parse_number(cell, x)) cell = format_fixed(x, opt.decimals);
                h += "<td" + cls(c) + ">" + escape(cell) + "</td>";
            }
            h += "</tr>";
        }
        h += "</tbody></table></div>";
        blocks_.push_back(std::move(h));
        return *this;
    }
    /// A figure: SVG markup from bar_chart/line_chart/heat_map/scatter (inserted as is),
    /// numbered, with an optional caption.
    html_page& figure(std::string svg_markup, std::string_view caption = {}) {
        ++figures_;
        std::string h = "<figure>" + std::move(svg_markup);
        h += "<figcaption><b>Figure " + std::to_string(figures_) + ".</b>";
        if (!caption.empty()) h += " " + escape(caption);
        h += "</figcaption></figure>";
        blocks_.push_back(std::move(h));
        return *this;
    }
    /// Trusted HTML inserted as is (not escaped). Keep it well-formed.
    html_page& raw_html(std::string html) {
        blocks_.push_back(std::move(html));
        return *this;
    }
    /// Where the results come from (command line, git commit, ...), shown in the footer.
    html_page& provenance(std::string text) {
        provenance_ = std::move(text);
        return *this;
    }

    /// The whole document. It is also well-formed XML (void elements self-closed).
    [[nodiscard]] std::string html(std::chrono::system_clock::time_point generated = std::chrono::system_clock::now()) const {
        std::string h;
        h.reserve(16384);
        h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n"
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />\n"
             "<meta name=\"generator\" content=\"depthlab report\" />\n<title>" +
             escape(title_) + "</title>\n<style>" + default_css + "</style>\n</head>\n<body>\n<main>\n<header class=\"title\"><h1>" +
             escape(title_) + "</h1>";
        if (!subtitle_.empty()) h += "<p class=\"subtitle\">" + escape(subtitle_) + "</p>";
        h += "</header>\n";
        if (sections_.size() >= 3) {
            h += "<nav class=\"toc\"><b>Contents</b><ol>";
            for (std::size_t i = 0; i < sections_.size(); ++i)
                h += "<li><a href=\"#s" + std::to_string(i + 1) + "\">" + escape(sections_[i]) + "</a></li>";
            h += "</ol></nav>\n";
        }
        for (const std::string& b : blocks_) {
            h += b;
            h += '\n';
        }
        h += "</main>\n<footer>Generated " + escape(utc_time(generated));
        if (!provenance_.empty()) h += " from <code>" + escape(provenance_) + "</code>";
        h += "</footer>\n</body>\n</html>\n";
        return h;
    }

    /// Writes the page atomically (write_file_atomically); throws std::runtime_error.
    void write(const std::filesystem::path& path) const { write_file_atomically(path, html()); }

    [[nodiscard]] const std::string& title() const { return title_; }

    /// "2025-06-01 14:03:12 UTC"
    static std::string utc_time(std::chrono::system_clock::time_point t) {
        using namespace std::chrono;
        const auto secs = floor<seconds>(t);
        const auto day = floor<days>(secs);
        const year_month_day ymd{day};
        const hh_mm_ss hms{secs - day};
        char buf[48];
        std::snprintf(buf, sizeof buf, "%04d-%02u-%02u %02d:%02d:%02d UTC", static_cast<int>(ymd.year()),
                      static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), static_cast<int>(hms.hours().count()),
                      static_cast<int>(hms.minutes().count()), static_cast<int>(hms.seconds().count()));
        return buf;
    }

private:
    std::string caption_html(std::string_view caption) {
        if (caption.empty()) return {};
        ++tables_;
        return "<div class=\"caption\"><b>Table " + std::to_string(tables_) + ".</b> " + escape(caption) + "</div>";
    }

    std::string title_, subtitle_, provenance_;
    std::vector<std::string> sections_;
    std::vector<std::string> blocks_;
    int figures_ = 0, tables_ = 0;
};

}  // namespace depthlab::report
