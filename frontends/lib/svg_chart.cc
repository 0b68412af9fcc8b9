#include "frontends/lib/svg_chart.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/atomic_file.h"

namespace amp {

namespace {

// Room for the y tick labels ("65536") and the rotated y label on the left; the title on top; the
// x tick labels and the x label under the last panel; one legend row per entry.
constexpr double kLeft = 88, kRight = 24, kTop = 52, kPanelGap = 18, kBelowPanels = 56, kLegendRow = 24;
constexpr int kMostTicks = 6;
constexpr const char* kFont = "DejaVu Sans,Verdana,Arial,sans-serif";
constexpr const char* kAxisColour = "#333333";
constexpr const char* kGridColour = "#e4e4e4";

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

std::string escaped(const std::string& text) {
  std::string s;
  for (char c : text) {
    switch (c) {
      case '&':
        s += "&amp;";
        break;
      case '<':
        s += "&lt;";
        break;
      case '>':
        s += "&gt;";
        break;
      case '"':
        s += "&quot;";
        break;
      default:
        s += c;
    }
  }
  return s;
}

// The 1-2-5 step that puts at most kMostTicks ticks on a span.
double tick_step(double span) {
  const double raw = span / kMostTicks;
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * decade >= raw) return m * decade;
  return 10 * decade;
}

// A y or x axis: data values to pixels, and where its ticks go with their labels.
struct Axis {
  double lo = 0, hi = 1;  // in the axis's own units (log2 of the value for a log2 axis)
  bool log2 = false;
  std::vector<std::pair<double, std::string>> ticks;  // position in axis units, label

  double unit(double v) const { return log2 ? std::log2(v) : v; }
  double fraction(double v) const { return (unit(v) - lo) / (hi - lo); }
};

std::string tick_label(double v, double step) {
  if (std::fabs(v) < step * 1e-9) return "0";
  return fmt::format("{:g}", std::round(v / step) * step);
}

// A linear axis over the data; the ends are moved out to whole ticks when `round_ends` (the y
// axes, so a curve never touches the frame), else kept at the data (the x axis starts at 0 and
// ends at the last step).
Axis linear_axis(Range r, bool round_ends) {
  if (r.empty()) r = {0, 1};
  if (r.hi - r.lo < 1e-12 * std::max(1.0, std::fabs(r.hi))) {
    const double pad = std::max(std::fabs(r.hi) * 0.1, 1e-3);
    r = {r.lo - pad, r.hi + pad};
  }
  const double step = tick_step(r.hi - r.lo);
  Axis a;
  a.lo = round_ends ? std::floor(r.lo / step) * step : r.lo;
  a.hi = round_ends ? std::ceil(r.hi / step) * step : r.hi;
  for (double t = std::ceil(a.lo / step) * step; t <= a.hi + step * 1e-9; t += step)
    a.ticks.emplace_back(t, tick_label(t, step));
  return a;
}

Axis log2_axis(Range r) {
  Axis a;
  a.log2 = true;
  if (r.empty()) r = {1, 2};
  a.lo = std::floor(std::log2(r.lo)) - 1;
  a.hi = std::ceil(std::log2(r.hi)) + 1;
  const int every = std::max(1, static_cast<int>(std::ceil((a.hi - a.lo) / kMostTicks)));
  for (double e = a.lo; e <= a.hi; e += every) {
    const double v = std::exp2(e);
    a.ticks.emplace_back(e, v >= 1e6 || v < 1 ? fmt::format("2^{:g}", e) : fmt::format("{:g}", v));
  }
  return a;
}

bool drawable(const ChartPanel& p, double y) { return std::isfinite(y) && (!p.log2_y || y > 0); }

struct Frame {
  double left, top, width, height;
};

class Drawing {
 public:
  Drawing(const Chart& chart, const Axis& x) : chart_(chart), x_(x) {}

  void panel(const ChartPanel& p, const Frame& f, int index, bool last);
  void legend(double top);
  std::string svg;

 private:
  double px(double x, const Frame& f) const { return f.left + x_.fraction(x) * f.width; }
  double py(double y, const Axis& a, const Frame& f) const { return f.top + (1 - a.fraction(y)) * f.height; }
  void series(const ChartSeries& s, const ChartPanel& p, const Axis& y, const Frame& f);
  void mark_at(ChartMark mark, const std::string& colour, double width, double opacity, double x, double y);
  void text(double x, double y, const std::string& s, const char* anchor, int size, const char* extra = "") {
    svg += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-family=\"{}\" font-size=\"{}\" fill=\"#111111\" "
        "text-anchor=\"{}\"{}>{}</text>\n",
        x, y, kFont, size, anchor, extra, escaped(s));
  }

  const Chart& chart_;
  const Axis& x_;
};

void Drawing::mark_at(ChartMark mark, const std::string& colour, double width, double opacity, double x, double y) {
  if (mark == ChartMark::kDots) {
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\" fill-opacity=\"{:g}\" stroke=\"#222222\" "
        "stroke-width=\"1\"/>\n",
        x, y, colour, opacity);
  } else {
    constexpr double r = 5;
    svg += fmt::format(
        "<path d=\"M{:.1f} {:.1f}L{:.1f} {:.1f}M{:.1f} {:.1f}L{:.1f} {:.1f}\" stroke=\"{}\" "
        "stroke-width=\"{:g}\" stroke-opacity=\"{:g}\"/>\n",
        x - r, y - r, x + r, y + r, x - r, y + r, x + r, y - r, colour, width, opacity);
  }
}

void Drawing::series(const ChartSeries& s, const ChartPanel& p, const Axis& y, const Frame& f) {
  const size_t n = std::min(s.x.size(), s.y.size());
  if (s.mark == ChartMark::kDots || s.mark == ChartMark::kCrosses) {
    for (size_t i = 0; i < n; ++i)
      if (drawable(p, s.y[i])) mark_at(s.mark, s.colour, s.width, s.opacity, px(s.x[i], f), py(s.y[i], y, f));
    return;
  }
  // One path; "M" starts a piece after a point that is left out. A step line holds each value
  // until the next point's x, then moves to its value.
  std::string d;
  bool pen_down = false;
  for (size_t i = 0; i < n; ++i) {
    if (!drawable(p, s.y[i])) {
      pen_down = false;
      continue;
    }
    const double X = px(s.x[i], f), Y = py(s.y[i], y, f);
    if (!pen_down)
      d += fmt::format("M{:.1f} {:.1f}", X, Y);
    else if (s.mark == ChartMark::kStepLine)
      d += fmt::format("H{:.1f}V{:.1f}", X, Y);
    else
      d += fmt::format("L{:.1f} {:.1f}", X, Y);
    pen_down = true;
  }
  if (d.empty()) return;
  svg += fmt::format(
      "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{:g}\" stroke-opacity=\"{:g}\" "
      "stroke-linejoin=\"round\" stroke-linecap=\"round\"/>\n",
      d, s.colour, s.width, s.opacity);
}

void Drawing::panel(const ChartPanel& p, const Frame& f, int index, bool last) {
  Range r;
  for (const ChartSeries& s : p.series)
    for (double y : s.y)
      if (drawable(p, y)) r.add(y);
  const Axis y = p.log2_y ? log2_axis(r) : linear_axis(r, true);

  // Grid first, under the data; then the data clipped to the frame; then the axes over it.
  for (const auto& [t, label] : y.ticks) {
    const double Y = f.top + (1 - (t - y.lo) / (y.hi - y.lo)) * f.height;
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"1\"/>\n", f.left, Y,
        f.left + f.width, Y, kGridColour);
    text(f.left - 8, Y + 5, label, "end", 14);
  }
  for (const auto& [t, label] : x_.ticks) {
    const double X = f.left + (t - x_.lo) / (x_.hi - x_.lo) * f.width;
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"1\"/>\n", X, f.top,
        X, f.top + f.height, kGridColour);
    if (last) text(X, f.top + f.height + 20, label, "middle", 14);
  }
  svg += fmt::format(
      "<clipPath id=\"panel{}\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/></clipPath>\n",
      index, f.left - 6, f.top - 6, f.width + 12, f.height + 12);
  svg += fmt::format("<g clip-path=\"url(#panel{})\">\n", index);
  for (const ChartSeries& s : p.series) series(s, p, y, f);
  svg += "</g>\n";
  svg += fmt::format("<path d=\"M{:.1f} {:.1f}V{:.1f}H{:.1f}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
                     f.left, f.top, f.top + f.height, f.left + f.width, kAxisColour);
  const double mid = f.top + f.height / 2;
  text(22, mid, p.y_label, "middle", 15, fmt::format(" transform=\"rotate(-90 22 {:.1f})\"", mid).c_str());
  if (last) text(f.left + f.width / 2, f.top + f.height + 44, chart_.x_label, "middle", 15);
}

void Drawing::legend(double top) {
  for (size_t i = 0; i < chart_.legend.size(); ++i) {
    const ChartLegendEntry& e = chart_.legend[i];
    const double y = top + kLegendRow * static_cast<double>(i) + kLegendRow / 2;
    if (e.mark == ChartMark::kLine || e.mark == ChartMark::kStepLine)
      svg += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"4\"/>\n", kLeft,
          y, kLeft + 30, y, e.colour);
    else
      mark_at(e.mark, e.colour, 2.5, 1, kLeft + 15, y);
    text(kLeft + 42, y + 5, e.text, "start", 15);
  }
}

}  // namespace

std::string chart_svg(const Chart& chart) {
  Range xr;
  xr.add(0);
  for (const ChartPanel& p : chart.panels)
    for (const ChartSeries& s : p.series)
      for (double x : s.x)
        if (std::isfinite(x)) xr.add(x);
  const Axis x = linear_axis(xr, false);

  double panels_height = 0;
  for (const ChartPanel& p : chart.panels) panels_height += p.height;
  panels_height += kPanelGap * static_cast<double>(std::max<size_t>(chart.panels.size(), 1) - 1);
  const double legend_top = kTop + panels_height + kBelowPanels;
  const double height = legend_top + kLegendRow * static_cast<double>(chart.legend.size()) + 12;

  Drawing d(chart, x);
  d.svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1:.0f}\" viewBox=\"0 0 {0} {1:.0f}\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      "<text x=\"{2:.1f}\" y=\"32\" font-family=\"{3}\" font-size=\"20\" font-weight=\"bold\" fill=\"#111111\" "
      "text-anchor=\"middle\">{4}</text>\n",
      chart.width, height, chart.width / 2.0, kFont, escaped(chart.title));
  double top = kTop;
  for (size_t i = 0; i < chart.panels.size(); ++i) {
    const Frame f{kLeft, top, chart.width - kLeft - kRight, static_cast<double>(chart.panels[i].height)};
    d.panel(chart.panels[i], f, static_cast<int>(i), i + 1 == chart.panels.size());
    top += f.height + kPanelGap;
  }
  d.legend(legend_top);
  d.svg += "</svg>\n";
  return d.svg;
}

void write_chart_svg(const Chart& chart, const std::string& path) {
  const std::string svg = chart_svg(chart);
  AtomicFile out(path);
  out.write(svg.data(), svg.size());
  out.commit();
}

}  // namespace amp
