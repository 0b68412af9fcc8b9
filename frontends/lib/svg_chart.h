// Line charts as SVG text, for pictures a browser, GitHub or rsvg-convert shows as they are:
// panels stacked over one shared x axis, each with its own y axis (linear, or log2 for a quantity
// that moves by factors of two, such as a loss scale), lines, step lines, dots and crosses, and a
// legend under the panels. Ticks fall on 1-2-5 steps. Text is DejaVu Sans (Debian's
// fonts-dejavu-core) with the usual fallbacks.
#pragma once

#include <string>
#include <vector>

namespace amp {

enum class ChartMark { kLine, kStepLine, kDots, kCrosses };

struct ChartSeries {
  std::string colour;  // "#rrggbb"
  ChartMark mark = ChartMark::kLine;
  double width = 2;  // stroke width of lines and crosses, in pixels
  double opacity = 1;
  std::vector<double> x, y;  // same length; a point with a non-finite y is left out (a line breaks there)
};

struct ChartPanel {
  std::string y_label;
  bool log2_y = false;  // ticks at powers of two; points with y <= 0 are left out
  int height = 380;     // pixels
  std::vector<ChartSeries> series;
};

struct ChartLegendEntry {
  std::string colour;
  ChartMark mark = ChartMark::kLine;
  std::string text;
};

struct Chart {
  std::string title, x_label;
  int width = 960;  // pixels
  std::vector<ChartPanel> panels;
  std::vector<ChartLegendEntry> legend;
};

std::string chart_svg(const Chart& chart);
// chart_svg written atomically; throws Error naming the path when it cannot be written.
void write_chart_svg(const Chart& chart, const std::string& path);

}  // namespace amp
