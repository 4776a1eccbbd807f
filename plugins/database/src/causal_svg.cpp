// The causal profile as an SVG (causal.hpp): a chart per location, highest impact first, two to a
// row. Plain SVG with no script, so any browser or image viewer shows it; each point's <title> is
// its tooltip.
#include <kairos/plugins/database/causal.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "output_helpers.hpp"

namespace kairos::database {
namespace {

using output_helpers::xml_text;

constexpr double chart_width = 440, chart_height = 300, header_height = 48, gap = 16;
constexpr double plot_left = 64, plot_right = 20, plot_top = 52, plot_bottom = 48;
constexpr int charts_per_row = 2;
constexpr const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

// The tick spacing of 1, 2 or 5 times a power of ten that cuts `span` into about five steps.
double tick_step(double span) {
  const double rough = span / 5;
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  for (const double multiple : {1.0, 2.0, 5.0})
    if (multiple * power >= rough) return multiple * power;
  return 10 * power;
}

std::string percent_label(double fraction) { return fmt::format("{:g}%", std::round(fraction * 1000) / 10); }

// The curve of one progress point, the `index`th of `curves`: its line, its points with their
// intervals, its legend.
template <class X, class Y>
void write_curve(std::ostream& out, const causal_curve& curve, std::size_t index, std::size_t curves, const X& x_of,
                 const Y& y_of) {
  const auto color = colors[index % std::size(colors)];
  // Each curve a few pixels aside, so that the interval bars of several at one speedup stay apart.
  const double dodge = 4.0 * (static_cast<double>(index) - static_cast<double>(curves - 1) / 2);
  std::string line;
  for (const auto& point : curve.estimates)
    line += fmt::format("{:.1f},{:.1f} ", x_of(point.line_speedup) + dodge, y_of(point.program_speedup));
  out << fmt::format("<g class=\"curve\" stroke=\"{0}\" fill=\"{0}\">\n<polyline fill=\"none\" points=\"{1}\"/>\n",
                     color, line);
  for (const auto& point : curve.estimates) {
    const double x = x_of(point.line_speedup) + dodge, y = y_of(point.program_speedup);
    if (!std::isnan(point.interval)) {
      const double y_low = y_of(point.program_speedup - point.interval),
                   y_high = y_of(point.program_speedup + point.interval);
      out << fmt::format(
          "<path class=\"interval\" d=\"M{0:.1f},{1:.1f}V{2:.1f}M{3:.1f},{1:.1f}H{4:.1f}M{3:.1f},"
          "{2:.1f}H{4:.1f}\"/>\n",
          x, y_low, y_high, x - 4, x + 4);
    }
    out << fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\"><title>{}: line {} -> program {:+.1f}%{} "
        "({} experiments, {} visits)</title></circle>\n",
        x, y, xml_text(curve.progress_point), percent_label(point.line_speedup), point.program_speedup * 100,
        std::isnan(point.interval) ? std::string{", no interval"} : fmt::format(" \u00b1 {:.1f}", point.interval * 100),
        point.experiments, point.visits);
  }
  out << "</g>\n";
  // Top left, where a rising curve leaves room; a style, since the stylesheet's text fill beats an attribute.
  out << fmt::format("<text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\" style=\"fill:{}\">{} ({})</text>\n",
                     plot_left + 8, plot_top + 12 + 14.0 * static_cast<double>(index), color,
                     xml_text(curve.progress_point), xml_text(curve.kind));
}

void write_chart(std::ostream& out, const causal_location& location, std::size_t rank, double left, double top) {
  // The y range holds every point and interval and 0, within coz's own sanity bounds (-100%..+200%).
  double low = 0, high = 0.05;
  for (const auto& curve : location.curves)
    for (const auto& point : curve.estimates) {
      const double half = std::isnan(point.interval) ? 0 : point.interval;
      low = std::min(low, point.program_speedup - half);
      high = std::max(high, point.program_speedup + half);
    }
  low = std::max(low, -1.0);
  high = std::min(high, 2.0);
  const double step = tick_step(high - low);
  low = std::floor(low / step) * step;
  high = std::ceil(high / step) * step;
  const double width = chart_width - plot_left - plot_right, height = chart_height - plot_top - plot_bottom;
  const auto x_of = [&](double line_speedup) { return plot_left + line_speedup * width; };
  const auto y_of = [&](double speedup) {
    return plot_top + (high - std::clamp(speedup, low, high)) / (high - low) * height;
  };

  out << fmt::format("<g class=\"chart\" transform=\"translate({:.1f},{:.1f})\">\n", left, top);
  out << fmt::format("<rect class=\"frame\" width=\"{}\" height=\"{}\"/>\n", chart_width, chart_height);
  out << fmt::format("<text class=\"title\" x=\"12\" y=\"20\">{}. {}</text>\n", rank, xml_text(location.selected));
  out << fmt::format("<text class=\"note\" x=\"12\" y=\"36\">{} scope, {} experiments, impact {:+.1f}%</text>\n",
                     xml_text(location.scope), location.experiments, location.impact * 100);
  for (double tick = low; tick <= high + step / 2; tick += step) {
    const double y = y_of(tick);
    out << fmt::format("<line class=\"{}\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>\n",
                       std::abs(tick) < step / 2 ? "zero" : "grid", plot_left, y, plot_left + width, y);
    out << fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", plot_left - 6,
                       y + 4, percent_label(std::abs(tick) < step / 2 ? 0.0 : tick));
  }
  for (int percent = 0; percent <= 100; percent += 25) {
    const double x = x_of(percent / 100.0);
    out << fmt::format("<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>\n", x,
                       plot_top, plot_top + height);
    out << fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}%</text>\n", x,
                       plot_top + height + 16, percent);
  }
  out << fmt::format("<text class=\"axis\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">line speedup</text>\n",
                     plot_left + width / 2, chart_height - 8);
  out << fmt::format(
      "<text class=\"axis\" transform=\"translate(14,{:.1f}) rotate(-90)\" "
      "text-anchor=\"middle\">program speedup</text>\n",
      plot_top + height / 2);
  for (std::size_t index = 0; index < location.curves.size(); ++index)
    write_curve(out, location.curves[index], index, location.curves.size(), x_of, y_of);
  out << "</g>\n";
}

}  // namespace

void write_causal_svg(connection& profile, std::ostream& out, std::size_t locations, const window_range& windows) {
  require_causal_experiments(profile);
  const auto summary = analyze_causal(profile, windows);
  const auto shown = std::min(locations, summary.locations.size());
  const auto rows = (shown + charts_per_row - 1) / charts_per_row;
  const double total_width = charts_per_row * chart_width + (charts_per_row + 1) * gap;
  const double total_height = header_height + static_cast<double>(rows) * (chart_height + gap) + gap;
  out << fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\">\n",
      total_width, total_height);
  out << "<style>\n"
         "text { font-family: sans-serif; font-size: 11px; fill: #333; }\n"
         ".heading { font-size: 15px; font-weight: bold; } .title { font-size: 13px; font-weight: bold; }\n"
         ".note { fill: #666; } .axis { font-size: 12px; }\n"
         ".frame { fill: #fff; stroke: #ccc; } .grid { stroke: #eee; } .zero { stroke: #888; stroke-dasharray: 4 3; }\n"
         ".curve polyline { stroke-width: 1.5; } .interval { fill: none; stroke-width: 1.2; }\n"
         "</style>\n<rect width=\"100%\" height=\"100%\" fill=\"#fafafa\"/>\n";
  out << fmt::format(
      "<text class=\"heading\" x=\"{}\" y=\"22\">kairos causal profile: {} experiments, {} of {} "
      "locations shown, by impact</text>\n",
      gap, summary.experiments, shown, summary.locations.size());
  out << fmt::format(
      "<text class=\"note\" x=\"{}\" y=\"38\">Program speedup predicted by virtually speeding up "
      "each location; bars: 95% intervals; impact: mean program speedup over the line speedups "
      "tried{}</text>\n",
      gap, shown == 0 ? ". No location had 5 visits of a progress point beside a baseline" : "");
  for (std::size_t index = 0; index < shown; ++index)
    write_chart(out, summary.locations[index], index + 1,
                gap + static_cast<double>(index % charts_per_row) * (chart_width + gap),
                header_height + static_cast<double>(index / charts_per_row) * (chart_height + gap));
  out << "</svg>\n";
}

}  // namespace kairos::database
