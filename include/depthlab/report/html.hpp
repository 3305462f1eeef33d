#pragma once
// Self-contained HTML reports with inline SVG figures: one file, no JavaScript, no network,
// readable on screen and on paper. Standard library only (it may be used by programs that
// do not link the rest of depthlab).
//
//   report::html_page page("ACT-ALBERT halting study");
//   page.section("Mean iterations per token category")
//       .table({"category", "ours", "paper"}, rows, {.decimals = 1, .highlight_column = 1})
//       .figure(report::bar_chart(categories, {{"ours", ours}, {"paper", paper}},
//                                 {.title = "Mean iterations", .y_label = "iterations"}),
//               "N_max = 12, tau = 5e-4.")
//       .provenance("train_act --nmax 12 (git 1a2b3c4)");
//   page.write("report.html");   // atomic: temp file + rename
//
// Figures (bar_chart, line_chart, heat_map, scatter) return SVG markup (a standalone,
// well-formed XML document with a viewBox, so it scales). Every string that reaches the
// markup (titles, labels, table cells, paragraphs) goes through escape(): the five XML
// specials become entities, control characters and invalid UTF-8 become U+FFFD. The only
// unescaped inputs are html_page::figure's SVG and html_page::raw_html, which are trusted.
//
// Missing values: NaN (or ±inf) is "not available" everywhere. Bars: no bar, "n/a" at the
// baseline. Lines: the line breaks (a gap); an isolated point keeps a marker. Heat maps:
// a hatched grey cell labelled "n/a" (and an "n/a" swatch under the colour bar). Scatter:
// the point is skipped. Tables: a numeric-formatted NaN cell reads "n/a".
//
// Colours: series use the Okabe–Ito palette (colour-blind safe) and, in line charts and
// scatter plots, a different marker shape per series too; heat maps use a sequential map
// from white to dark blue (ColorBrewer "Blues"; darker = larger), whose luminance falls
// monotonically.
//
// Layout is computed from estimated text widths (tuned on DejaVu Sans, one of the widest
// common sans fonts, so narrower system fonts only leave more room): margins grow with
// the tick labels, long category labels are rotated, legends sit above the plot area and
// never cover data.
//
// This header includes the whole report library; its parts can be included alone:
//   report/text.hpp               escaping, text widths, number formatting
//   report/scales.hpp             colours, axis ticks and ranges
//   report/svg.hpp                SVG primitives shared by the charts
//   report/charts/bar_chart.hpp   bar_chart       report/charts/line_chart.hpp  line_chart
//   report/charts/heat_map.hpp    heat_map        report/charts/scatter.hpp     scatter
//   report/page.hpp               html_page, write_file_atomically
#include "depthlab/report/text.hpp"
#include "depthlab/report/scales.hpp"
#include "depthlab/report/svg.hpp"
#include "depthlab/report/charts/bar_chart.hpp"
#include "depthlab/report/charts/line_chart.hpp"
#include "depthlab/report/charts/heat_map.hpp"
#include "depthlab/report/charts/scatter.hpp"
#include "depthlab/report/page.hpp"
