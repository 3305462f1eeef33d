// HTML reports and SVG figures (depthlab/report/html.hpp): escaping, well-formed XML of
// every figure and of the page (checked by a small tag-balance parser below), nice ticks,
// the sequential colour map, NaN handling, and atomic writes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include <depthlab/report/html.hpp>
#include "temp_dir.hpp"

namespace report = depthlab::report;
namespace fs = std::filesystem;

namespace {

const double nan_v = std::numeric_limits<double>::quiet_NaN();

/// Checks that `doc` is well-formed XML as far as a report needs: balanced, properly nested
/// tags; quoted, unique attributes without '<'; only the five predefined entities or
/// character references after '&'; one root element (a DOCTYPE, comments and processing
/// instructions allowed). Returns "" when fine, else a description with the offset.
std::string xml_error(std::string_view doc) {
    std::vector<std::string> stack;
    int roots = 0;
    std::size_t i = 0;
    const std::size_t n = doc.size();
    auto at = [&](std::size_t p) { return " at offset " + std::to_string(p); };
    auto name_start = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; };
    auto name_char = [&](char c) {
        return name_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
    };
    auto check_entity = [&](std::size_t p) -> std::string {  // doc[p] == '&'
        const std::size_t semi = doc.find(';', p);
        if (semi == std::string_view::npos || semi - p > 12) return "bare '&'" + at(p);
        const std::string_view ent = doc.substr(p + 1, semi - p - 1);
        if (ent == "amp" || ent == "lt" || ent == "gt" || ent == "quot" || ent == "apos") return "";
        if (ent.size() >= 2 && ent[0] == '#') {
            const bool hex = ent[1] == 'x';
            const std::string_view digits = ent.substr(hex ? 2 : 1);
            if (digits.empty()) return "empty character reference" + at(p);
            for (char c : digits)
                if (!(hex ? std::isxdigit(static_cast<unsigned char>(c)) : std::isdigit(static_cast<unsigned char>(c))))
                    return "bad character reference" + at(p);
            return "";
        }
        return "unknown entity &" + std::string(ent) + ";" + at(p);
    };
    while (i < n) {
        const char c = doc[i];
        if (c == '&') {
            if (std::string e = check_entity(i); !e.empty()) return e;
            ++i;
            continue;
        }
        if (c != '<') {
            if (stack.empty() && !std::isspace(static_cast<unsigned char>(c))) return "text outside the root element" + at(i);
            ++i;
            continue;
        }
        if (doc.substr(i, 4) == "<!--") {
            const std::size_t e = doc.find("-->", i + 4);
            if (e == std::string_view::npos) return "unterminated comment" + at(i);
            i = e + 3;
            continue;
        }
        if (doc.substr(i, 2) == "<?") {
            const std::size_t e = doc.find("?>", i + 2);
            if (e == std::string_view::npos) return "unterminated processing instruction" + at(i);
            i = e + 2;
            continue;
        }
        if (doc.substr(i, 2) == "<!") {
            if (roots > 0 || !stack.empty()) return "declaration inside the document" + at(i);
            const std::size_t e = doc.find('>', i);
            if (e == std::string_view::npos) return "unterminated declaration" + at(i);
            i = e + 1;
            continue;
        }
        if (doc.substr(i, 2) == "</") {
            std::size_t p = i + 2;
            const std::size_t s = p;
            while (p < n && name_char(doc[p])) ++p;
            const std::string name(doc.substr(s, p - s));
            while (p < n && std::isspace(static_cast<unsigned char>(doc[p]))) ++p;
            if (p >= n || doc[p] != '>') return "bad end tag" + at(i);
            if (stack.empty()) return "end tag </" + name + "> without a start tag" + at(i);
            if (stack.back() != name) return "end tag </" + name + "> closes <" + stack.back() + ">" + at(i);
            stack.pop_back();
            i = p + 1;
            continue;
        }
        // Start tag.
        std::size_t p = i + 1;
        if (p >= n || !name_start(doc[p])) return "'<' that starts no tag" + at(i);
        const std::size_t s = p;
        while (p < n && name_char(doc[p])) ++p;
        const std::string name(doc.substr(s, p - s));
        std::set<std::string> attrs;
        bool self_closing = false;
        for (;;) {
            const std::size_t before = p;
            while (p < n && std::isspace(static_cast<unsigned char>(doc[p]))) ++p;
            if (p >= n) return "unterminated start tag <" + name + at(i);
            if (doc[p] == '>') {
                ++p;
                break;
            }
            if (doc.substr(p, 2) == "/>") {
                p += 2;
                self_closing = true;
                break;
            }
            if (p == before) return "attributes not separated by blanks in <" + name + ">" + at(p);
            const std::size_t a = p;
            if (!name_start(doc[p])) return "bad attribute name in <" + name + ">" + at(p);
            while (p < n && name_char(doc[p])) ++p;
            const std::string attr(doc.substr(a, p - a));
            if (!attrs.insert(attr).second) return "duplicate attribute " + attr + " in <" + name + ">" + at(a);
            if (p >= n || doc[p] != '=') return "attribute " + attr + " without a value" + at(p);
            ++p;
            if (p >= n || (doc[p] != '"' && doc[p] != '\'')) return "unquoted attribute " + attr + at(p);
            const char q = doc[p++];
            const std::size_t e = doc.find(q, p);
            if (e == std::string_view::npos) return "unterminated attribute " + attr + at(p);
            for (std::size_t k = p; k < e; ++k) {
                if (doc[k] == '<') return "'<' in attribute " + attr + at(k);
                if (doc[k] == '&')
                    if (std::string err = check_entity(k); !err.empty()) return err;
            }
            p = e + 1;
        }
        if (stack.empty()) {
            if (++roots > 1) return "second root element <" + name + ">" + at(i);
        }
        if (!self_closing) stack.push_back(name);
        i = p;
    }
    if (!stack.empty()) return "unclosed <" + stack.back() + ">";
    if (roots != 1) return "no root element";
    return "";
}

std::size_t count(std::string_view hay, std::string_view needle) {
    std::size_t k = 0;
    for (std::size_t p = hay.find(needle); p != std::string_view::npos; p = hay.find(needle, p + needle.size())) ++k;
    return k;
}

/// No number in the markup printed as nan or inf.
bool has_non_finite_text(std::string_view s) {
    std::string low(s);
    std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return low.find("nan") != std::string::npos || low.find("inf") != std::string::npos;
}

/// The fill colours of positioned <rect x=...> elements (cells), in order, that are plain "#rrggbb".
std::vector<report::rgb> rect_fills(std::string_view svg) {
    std::vector<report::rgb> out;
    for (std::size_t p = svg.find("<rect x="); p != std::string_view::npos; p = svg.find("<rect x=", p + 1)) {
        const std::size_t end = svg.find('>', p);
        const std::string_view tag = svg.substr(p, end - p);
        const std::size_t f = tag.find("fill=\"#");
        if (f == std::string_view::npos) continue;
        const std::string hex(tag.substr(f + 7, 6));
        const long v = std::strtol(hex.c_str(), nullptr, 16);
        out.push_back({static_cast<int>((v >> 16) & 255), static_cast<int>((v >> 8) & 255), static_cast<int>(v & 255)});
    }
    return out;
}

struct temp_dir : depthlab_test::temp_dir {
    temp_dir() : depthlab_test::temp_dir("report") {}
};

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::string nasty = "a<b & \"c\" 'd'>";
const std::string nasty_escaped = "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;";

}  // namespace

TEST_CASE("report: the XML checker itself accepts good and rejects bad markup") {
    CHECK(xml_error("<svg a=\"1\"><g><text>x &amp; y</text></g><rect/></svg>") == "");
    CHECK(xml_error("<!DOCTYPE html>\n<html><body/></html>\n") == "");
    CHECK(xml_error("<svg><g></svg>") != "");
    CHECK(xml_error("<svg><g></g>") != "");
    CHECK(xml_error("<svg>a < b</svg>") != "");
    CHECK(xml_error("<svg>a & b</svg>") != "");
    CHECK(xml_error("<svg a=\"<\"></svg>") != "");
    CHECK(xml_error("<svg a=1></svg>") != "");
    CHECK(xml_error("<svg a=\"1\" a=\"2\"></svg>") != "");
    CHECK(xml_error("<svg></svg><svg></svg>") != "");
}

TEST_CASE("report: escaping of text, attributes, control characters and invalid UTF-8") {
    CHECK(report::escape(nasty) == nasty_escaped);
    CHECK(report::escape("plain") == "plain");
    CHECK(report::escape("") == "");
    CHECK(report::escape("[MASK]\u2192[MASK] \u03c4") == "[MASK]\u2192[MASK] \u03c4");  // valid UTF-8 kept
    CHECK(report::escape(std::string("a\x01" "b", 3)) == "a\uFFFDb");                    // control character
    CHECK(report::escape("tab\tnl\n") == "tab\tnl\n");
    CHECK(report::escape("bad \xff byte") == "bad \uFFFD byte");
    CHECK(report::escape("cut \xe2\x86") == "cut \uFFFD\uFFFD");          // truncated sequence
    CHECK(report::escape("over \xc0\xaf") == "over \uFFFD\uFFFD");        // overlong '/'
    CHECK(report::escape("sur \xed\xa0\x80") == "sur \uFFFD\uFFFD\uFFFD");  // a surrogate
    CHECK(xml_error("<t>" + report::escape(std::string("\x00\x1f<&>\xfe", 6)) + "</t>") == "");
    // Widths count code points, not bytes.
    CHECK(report::text_width("\u2192\u2192", 10) == doctest::Approx(report::text_width("\u03c4\u03c4", 10)));
    CHECK(report::text_width("MMMM", 12) > report::text_width("iiii", 12));
}

TEST_CASE("report: number formatting") {
    CHECK(report::format_fixed(7.125, 1) == "7.1");
    CHECK(report::format_fixed(-0.04, 1) == "0.0");  // no "-0.0"
    CHECK(report::format_fixed(nan_v, 2) == "n/a");
    CHECK(report::format_number(nan_v) == "n/a");
    CHECK(report::format_number(0.000123456, 3) == "0.000123");
    CHECK(report::format_number(std::numeric_limits<double>::infinity()) == "\u221E");
}

TEST_CASE("report: nice ticks") {
    auto vals = [](const report::axis_ticks& t) { return t.values; };
    auto approx_eq = [](const std::vector<double>& a, const std::vector<double>& b) {
        if (a.size() != b.size()) return false;
        for (std::size_t i = 0; i < a.size(); ++i)
            if (std::abs(a[i] - b[i]) > 1e-9 * std::max(1.0, std::abs(b[i]))) return false;
        return true;
    };
    CHECK(approx_eq(vals(report::nice_ticks(0, 7.3)), {0, 2, 4, 6, 8}));
    CHECK(approx_eq(vals(report::nice_ticks(0, 1)), {0, 0.2, 0.4, 0.6, 0.8, 1.0}));
    CHECK(approx_eq(vals(report::nice_ticks(0, 12)), {0, 2, 4, 6, 8, 10, 12}));
    CHECK(approx_eq(vals(report::nice_ticks(0, 100)), {0, 20, 40, 60, 80, 100}));
    CHECK(approx_eq(vals(report::nice_ticks(0.43, 0.99)), {0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}));
    CHECK(approx_eq(vals(report::nice_ticks(-3.2, 14)), {-5, 0, 5, 10, 15}));
    CHECK(approx_eq(vals(report::nice_ticks(7.3, 0)), {0, 2, 4, 6, 8}));  // reversed range
    // Labels: as many decimals as the step needs, no "-0", no float noise.
    const report::axis_ticks t = report::nice_ticks(0, 1);
    std::vector<std::string> labels;
    for (double v : t.values) labels.push_back(t.label(v));
    CHECK(labels == std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"});
    const report::axis_ticks t2 = report::nice_ticks(-0.3, 0.3);
    for (double v : t2.values) CHECK(t2.label(v).find("-0.0") == std::string::npos);
    CHECK(report::nice_ticks(0, 0.6).label(0.30000000000000004) == "0.3");
    // Integer-only ticks (iterations) never step below 1.
    const report::axis_ticks ti = report::nice_ticks(1, 3, 5, true);
    CHECK(ti.step == 1.0);
    CHECK(approx_eq(ti.values, {1, 2, 3}));
    // Degenerate and non-finite ranges still give usable ticks.
    CHECK(report::nice_ticks(5, 5).values.size() >= 2);
    CHECK(report::nice_ticks(5, 5).front() <= 5);
    CHECK(report::nice_ticks(5, 5).back() >= 5);
    CHECK(report::nice_ticks(0, 0).front() == 0);
    CHECK(approx_eq(vals(report::nice_ticks(nan_v, 3)), vals(report::nice_ticks(0, 1))));
    // Properties over many ranges: cover the range, steps of 1/2/5 x 10^k, 3..11 ticks.
    for (double lo : {-1234.5, -7.0, -0.01, 0.0, 0.37, 3.0, 1e-6, 42.0})
        for (double span : {1e-5, 0.003, 0.9, 1.0, 7.3, 55.0, 999.0, 12345.0}) {
            const report::axis_ticks k = report::nice_ticks(lo, lo + span);
            CAPTURE(lo);
            CAPTURE(span);
            REQUIRE(k.values.size() >= 2);
            CHECK(k.values.size() <= 11);
            CHECK(k.front() <= lo + 1e-12);
            CHECK(k.back() >= lo + span - 1e-12);
            const double m = k.step / std::pow(10.0, std::floor(std::log10(k.step) + 1e-9));
            CHECK((std::abs(m - 1) < 1e-9 || std::abs(m - 2) < 1e-9 || std::abs(m - 5) < 1e-9));
            std::set<std::string> distinct;
            for (double v : k.values) distinct.insert(k.label(v));
            CHECK(distinct.size() == k.values.size());  // labels tell ticks apart
        }
    // Log ticks: decades, with 2 and 5 in between for short ranges.
    CHECK(approx_eq(report::log_ticks(1.9, 10.5).values, {1, 2, 5, 10, 20, 50, 100}));
    CHECK(approx_eq(report::log_ticks(1e-4, 3).values, {1e-4, 1e-3, 1e-2, 1e-1, 1, 10}));
    CHECK(report::log_ticks(1e-4, 3).label(1e-3) == "0.001");
    CHECK(report::log_ticks(1e-6, 3).label(1e-6) == "1e-06");
}

TEST_CASE("report: sequential colour map is monotone, white to dark blue; series palette") {
    CHECK(report::to_hex(report::sequential_rgb(0)) == "#ffffff");
    CHECK(report::to_hex(report::sequential_rgb(1)) == "#08306b");
    // Darker as the value grows: never lighter at a fine step (8-bit rounding may repeat
    // a colour), strictly darker at a step of 0.05.
    for (int steps : {1000, 20}) {
        double prev = 2;
        for (int i = 0; i <= steps; ++i) {
            const report::rgb c = report::sequential_rgb(static_cast<double>(i) / steps);
            const double l = report::relative_luminance(c);
            CAPTURE(steps);
            CAPTURE(i);
            if (steps == 20) CHECK(l < prev);
            else CHECK(l <= prev);
            CHECK(c.b >= c.r);  // stays blue
            CHECK(c.b >= c.g);
            prev = l;
        }
    }
    CHECK(report::sequential_colour(-3) == report::sequential_colour(0));  // clamped
    CHECK(report::sequential_colour(7) == report::sequential_colour(1));
    CHECK(report::sequential_colour(nan_v) != report::sequential_colour(0));  // n/a grey
    std::set<std::string> palette;
    for (std::size_t i = 0; i < report::okabe_ito.size(); ++i) palette.insert(report::series_colour(i));
    CHECK(palette.size() == 8);
    CHECK(report::series_colour(8) == report::series_colour(0));
}

TEST_CASE("report: bar chart markup, escaping, whiskers and NaN") {
    const std::string svg = report::bar_chart({"all", nasty, "[CLS]"},
                                              {{"ours " + nasty, {3.8, nan_v, 6.0}, {0.5, 0.2, nan_v}}, {"paper", {3.5, 5.8, 6.0}}},
                                              {.title = "Title " + nasty,
                                               .subtitle = "sub & title",
                                               .x_label = "x <label>",
                                               .y_label = "y 'label'",
                                               .show_values = true});
    CHECK(xml_error(svg) == "");
    CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 720 400\"", 0) == 0);
    CHECK(svg.find(nasty) == std::string::npos);
    CHECK(svg.find(nasty_escaped) != std::string::npos);
    CHECK(svg.find("x &lt;label&gt;") != std::string::npos);
    CHECK(svg.find("<title id=") != std::string::npos);
    CHECK(svg.find(">n/a</text>") != std::string::npos);  // the NaN bar
    CHECK(!has_non_finite_text(svg));
    CHECK(svg.find(report::series_colour(0)) != std::string::npos);
    CHECK(svg.find(report::series_colour(1)) != std::string::npos);
    CHECK(svg.find(">3.8</text>") != std::string::npos);  // a value label
    // Mismatched sizes are refused.
    CHECK_THROWS_AS(report::bar_chart({"a", "b"}, {{"s", {1.0}}}), std::invalid_argument);
    CHECK_THROWS_AS(report::bar_chart({"a"}, {{"s", {1.0}, {1.0, 2.0}}}), std::invalid_argument);
    // Degenerate inputs still give well-formed figures.
    CHECK(xml_error(report::bar_chart({}, {})) == "");
    CHECK(xml_error(report::bar_chart({"a"}, {{"s", {nan_v}}})) == "");
    CHECK(xml_error(report::bar_chart({"a", "b"}, {{"s", {-2.0, 0.0}}})) == "");
    // Long labels are rotated rather than overlapping.
    const std::string rot = report::bar_chart({"a very long category name", "another very long category name", "x", "y", "z", "w"},
                                              {{"s", {1, 2, 3, 4, 5, 6}}});
    CHECK(rot.find("rotate(-35") != std::string::npos);
    CHECK(xml_error(rot) == "");
}

TEST_CASE("report: line chart markup, NaN gaps, log scale") {
    std::vector<report::line_series> s = {{"a " + nasty, {1, 2, 3, 4, 5}, {0.5, 0.7, nan_v, 0.9, 0.95}},
                                          {"b", {1, 2, 3, 4, 5}, {0.4, nan_v, 0.6, nan_v, 0.8}},
                                          {"empty", {}, {}},
                                          {"all missing", {1, 2}, {nan_v, nan_v}}};
    const std::string svg = report::line_chart(s, {.title = "cos", .x_label = "iteration", .y_label = nasty, .markers = false});
    CHECK(xml_error(svg) == "");
    CHECK(!has_non_finite_text(svg));
    CHECK(svg.find(nasty_escaped) != std::string::npos);
    // Series a: two runs (one gap) -> "M" twice in its path; series b: isolated points
    // (3 runs of one point), drawn as markers although markers are off.
    const std::size_t pa = svg.find("<path d=\"M");
    REQUIRE(pa != std::string::npos);
    const std::string da = svg.substr(pa, svg.find('"', pa + 9) - pa);
    CHECK(count(da, "M") == 2);
    const std::size_t pb = svg.find("<path d=\"M", pa + 1);
    REQUIRE(pb != std::string::npos);
    const std::string db = svg.substr(pb, svg.find('"', pb + 9) - pb);
    CHECK(count(db, "M") == 3);
    // Markers: series a has none (markers off, no isolated point); b has 3 (isolated), as squares.
    CHECK(count(svg, "<circle") == 0);
    CHECK(count(svg, "<rect x=") - count(report::line_chart({s[0]}, {.markers = false}), "<rect x=") >= 3);
    // With markers on, every finite point gets one.
    const std::string with = report::line_chart({s[0]}, {});
    CHECK(count(with, "<circle") == 4 + 1);  // 4 points + the legend swatch
    // Log scale: non-positive values are gaps, ticks are powers of ten.
    const std::string lg = report::line_chart({{"loss", {0, 1, 2, 3, 4}, {10.0, 3.0, 0.0, -1.0, 1.1}}},
                                              {.title = "loss", .log_y = true});
    CHECK(xml_error(lg) == "");
    CHECK(!has_non_finite_text(lg));
    CHECK(lg.find(">10</text>") != std::string::npos);
    CHECK_THROWS_AS(report::line_chart({{"bad", {1, 2}, {1}}}), std::invalid_argument);
    CHECK(xml_error(report::line_chart({})) == "");
    // Constant data, explicit limits.
    CHECK(xml_error(report::line_chart({{"c", {1, 2, 3}, {1, 1, 1}}}, {.y_min = 0.0, .y_max = 2.0})) == "");
}

TEST_CASE("report: heat map colours, labels and n/a cells") {
    const std::vector<std::vector<double>> v = {{0.0, 0.25, 0.5, 0.75, 1.0}};
    const std::string svg = report::heat_map({"E:SA " + nasty}, {"1", "2", "3", "4", "5"}, v,
                                             {.title = "importance", .value_label = "contribution"});
    CHECK(xml_error(svg) == "");
    CHECK(svg.find(nasty_escaped) != std::string::npos);
    // Cell fills, in order, get darker with the value.
    const std::vector<report::rgb> fills = rect_fills(svg);
    REQUIRE(fills.size() >= 5);
    for (std::size_t i = 0; i + 1 < 5; ++i)
        CHECK(report::relative_luminance(fills[i]) > report::relative_luminance(fills[i + 1]));
    CHECK(report::to_hex(fills[0]) == report::sequential_colour(0));
    CHECK(report::to_hex(fills[4]) == report::sequential_colour(1));
    CHECK(svg.find(">0.50</text>") != std::string::npos);  // values printed (2 decimals)
    CHECK(svg.find("linearGradient") != std::string::npos);  // the colour bar
    CHECK(svg.find("n/a") == std::string::npos);  // no NaN: no n/a swatch, no pattern
    CHECK(svg.find("<pattern") == std::string::npos);

    // NaN cells: hatched, labelled n/a, and an n/a swatch in the legend.
    const std::string na = report::heat_map({"D:SA", "D:FF"}, {"1", "2"}, {{0.1, nan_v}, {0.9, 0.5}}, {.show_values = false});
    CHECK(xml_error(na) == "");
    CHECK(!has_non_finite_text(na));
    CHECK(count(na, ">n/a</text>") == 2);  // the cell and the colour-bar swatch
    CHECK(na.find("<pattern") != std::string::npos);
    CHECK(count(na, "-na)") == 2);  // the cell and the swatch use the hatch pattern
    CHECK(na.find(">0.10</text>") == std::string::npos);  // show_values off
    // Out-of-range values are clamped, other ranges map lo..hi.
    const std::string cl = report::heat_map({"r"}, {"a", "b"}, {{-5.0, 5.0}});
    const std::vector<report::rgb> cf = rect_fills(cl);
    CHECK(report::to_hex(cf[0]) == "#ffffff");
    CHECK(report::to_hex(cf[1]) == "#08306b");
    const std::vector<report::rgb> rf = rect_fills(report::heat_map({"r"}, {"a"}, {{15.0}}, {.lo = 10, .hi = 20}));
    CHECK(report::to_hex(rf[0]) == report::sequential_colour(0.5));
    // Ids are unique per figure (several figures share one HTML page).
    const std::string na2 = report::heat_map({"D:SA"}, {"1"}, {{nan_v}});
    auto pattern_id = [](const std::string& s) {
        const std::size_t p = s.find("<pattern id=\"");
        return s.substr(p + 13, s.find('"', p + 13) - p - 13);
    };
    CHECK(pattern_id(na) != pattern_id(na2));
    CHECK_THROWS_AS(report::heat_map({"a", "b"}, {"1"}, {{0.5}}), std::invalid_argument);
    CHECK_THROWS_AS(report::heat_map({"a"}, {"1", "2"}, {{0.5}}), std::invalid_argument);
    CHECK_THROWS_AS(report::heat_map({"a"}, {"1"}, {{0.5}}, {.lo = 1, .hi = 1}), std::invalid_argument);
    // Long column labels are rotated.
    CHECK(report::heat_map({"a"}, {"a rather long column label", "and another long one", "x", "y", "z", "w", "v", "u"},
                           {{0, 0, 0, 0, 0, 0, 0, 0}})
              .find("rotate(-40") != std::string::npos);
}

TEST_CASE("report: scatter with labels, NaN points skipped, diagonal") {
    std::vector<report::scatter_series> s(2);
    s[0].name = "encoder " + nasty;
    s[1].name = "decoder";
    for (int i = 1; i <= 12; ++i) s[i % 2].points.push_back({double(i), double(13 - i), std::string("m") + std::to_string(i)});
    s[0].points.push_back({nan_v, 1.0, "lost"});
    s[1].points.push_back({3.0, std::numeric_limits<double>::infinity(), "lost too"});
    s[1].points.push_back({4.0, 4.0, "<&>"});
    const std::string svg = report::scatter(s, {.title = "ranks", .x_label = "a", .y_label = "b", .diagonal = true});
    CHECK(xml_error(svg) == "");
    CHECK(!has_non_finite_text(svg));
    CHECK(svg.find("lost") == std::string::npos);  // skipped points have no label
    CHECK(svg.find(">&lt;&amp;&gt;</text>") != std::string::npos);
    CHECK(svg.find("stroke-dasharray") != std::string::npos);  // y = x
    CHECK(count(svg, "<circle") == 6 + 1);  // series 0's points (circles) + legend swatch
    for (int i = 1; i <= 12; ++i) CHECK(svg.find(std::string(">m") + std::to_string(i) + "</text>") != std::string::npos);
    CHECK(report::scatter(s, {.show_labels = false}).find(">m1</text>") == std::string::npos);
    CHECK(xml_error(report::scatter({})) == "");
    CHECK(xml_error(report::scatter({{"one", {{1, 1, "only"}}}})) == "");
}

TEST_CASE("report: html page content, escaping, tables, well-formed") {
    report::html_page page("Study " + nasty, "subtitle & more");
    page.section("One " + nasty)
        .paragraph("First <para>.\n\nSecond para.")
        .note("demo data")
        .preformatted("cmd --flag <x> & y")
        .section("Two")
        .key_values({{"N_max", "12"}, {"tau<", "5e-4"}}, "Settings")
        .table({"category", "ours", "paper"}, {{"all", "3.8125", "3.5"}, {"[CLS]", "nan", "6"}, {"short"}},
               {.caption = "Mean iterations", .decimals = 1, .highlight_column = 1})
        .section("Three")
        .figure(report::bar_chart({"a"}, {{"s", {1.0}}}), "A caption & more")
        .figure(report::heat_map({"r"}, {"c"}, {{nan_v}}))
        .provenance("train --nmax 12 'quoted' (git abc123)");
    using namespace std::chrono;
    const auto when = sys_days{year{2024} / 3 / 5} + hours{13} + minutes{4} + seconds{5};
    const std::string h = page.html(when);
    CHECK(xml_error(h) == "");
    CHECK(h.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(h.find("<meta charset=\"utf-8\" />") != std::string::npos);
    CHECK(h.find("<script") == std::string::npos);  // no JavaScript
    CHECK(h.find("http://") == h.find("http://www.w3.org/2000/svg"));  // no external resources
    CHECK(h.find("https://") == std::string::npos);
    CHECK(h.find("<title>Study " + nasty_escaped + "</title>") != std::string::npos);
    CHECK(h.find(nasty) == std::string::npos);
    CHECK(h.find("<p>First &lt;para&gt;.</p>") != std::string::npos);
    CHECK(h.find("<p>Second para.</p>") != std::string::npos);
    CHECK(h.find("<pre>cmd --flag &lt;x&gt; &amp; y</pre>") != std::string::npos);
    CHECK(h.find("<nav class=\"toc\">") != std::string::npos);  // three sections
    CHECK(count(h, "<h2 id=") == 3);
    // Numeric formatting, n/a, padding of short rows, highlighted and numeric columns.
    CHECK(h.find(">3.8</td>") != std::string::npos);
    CHECK(h.find(">3.5</td>") != std::string::npos);
    CHECK(h.find(">6.0</td>") != std::string::npos);
    CHECK(h.find(">n/a</td>") != std::string::npos);
    CHECK(h.find("<th class=\"num hl\">ours</th>") != std::string::npos);
    CHECK(h.find("<td>short</td><td class=\"num hl\"></td><td class=\"num\"></td>") != std::string::npos);
    CHECK(h.find("<b>Table 1.</b> Settings") != std::string::npos);
    CHECK(h.find("<b>Table 2.</b> Mean iterations") != std::string::npos);
    CHECK(h.find("<b>Figure 1.</b> A caption &amp; more") != std::string::npos);
    CHECK(h.find("<b>Figure 2.</b>") != std::string::npos);
    // Footer: generation time and provenance.
    CHECK(h.find("Generated 2024-03-05 13:04:05 UTC") != std::string::npos);
    CHECK(h.find("train --nmax 12 &#39;quoted&#39; (git abc123)") != std::string::npos);
    CHECK(h.find("@media print") != std::string::npos);
    // Rows longer than the header are refused.
    CHECK_THROWS_AS(report::html_page("t").table({"a"}, {{"1", "2"}}), std::invalid_argument);
    // Fewer than three sections: no contents list.
    CHECK(report::html_page("t").section("only").html().find("<nav") == std::string::npos);
}

TEST_CASE("report: pages and files are written atomically") {
    temp_dir dir;
    const fs::path target = dir.path / "report.html";
    report::html_page first("first version");
    first.paragraph("one");
    first.write(target);
    const std::string v1 = slurp(target);
    CHECK(v1.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(v1.find("first version") != std::string::npos);
    CHECK(xml_error(v1) == "");
    CHECK(dir.listing() == std::vector<std::string>{"report.html"});  // no temporary left behind

    // Rewriting replaces the file by rename: a hard link to the old file keeps the old,
    // complete content (an in-place rewrite would have changed it or cut it short).
    fs::create_hard_link(target, dir.path / "old.html");
    report::html_page second("second version");
    second.write(target);
    CHECK(slurp(target).find("second version") != std::string::npos);
    CHECK(slurp(dir.path / "old.html") == v1);
    CHECK(dir.listing() == std::vector<std::string>{"old.html", "report.html"});

    // A failed write leaves the target untouched and no temporary file: the target is a
    // non-empty directory (the rename fails) or its folder does not exist.
    const fs::path blocked = dir.path / "blocked.html";
    fs::create_directories(blocked);
    std::ofstream(blocked / "keep.txt") << "keep";
    CHECK_THROWS_AS(second.write(blocked), std::runtime_error);
    CHECK(fs::is_directory(blocked));
    CHECK(slurp(blocked / "keep.txt") == "keep");
    CHECK(dir.listing() == std::vector<std::string>{"blocked.html", "old.html", "report.html"});
    CHECK_THROWS_AS(second.write(dir.path / "missing" / "r.html"), std::runtime_error);
    CHECK(dir.listing() == std::vector<std::string>{"blocked.html", "old.html", "report.html"});

    // The plain helper (e.g. for a standalone .svg).
    const std::string svg = report::scatter({{"s", {{1, 2, "p"}}}});
    report::write_file_atomically(dir.path / "fig.svg", svg);
    CHECK(slurp(dir.path / "fig.svg") == svg);
    report::write_file_atomically(dir.path / "empty.txt", "");
    CHECK(fs::file_size(dir.path / "empty.txt") == 0);
}
