// The pictures of amp-train --plot, looked at as a person would: each SVG is rendered to PNG by
// rsvg-convert (librsvg, as a browser or GitHub draws it), its axes are found as long dark lines,
// the curves by their colours at positions read against those axes, and the text read back with
// the tesseract OCR engine. Nothing here compares SVG bytes.
#include "frontends/lib/training_plot.h"

#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <random>

#include "frontends/lib/npz.h"
#include "frontends/lib/svg_chart.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

constexpr const char* kBlue = "#1f77b4";    // the first run's colour in training_chart
constexpr const char* kOrange = "#ff7f0e";  // the second run's
constexpr const char* kRed = "#d62728";     // skipped steps

struct Rgb {
  int r, g, b;
};

Rgb parse_colour(const std::string& hex) {
  const long v = std::stol(hex.substr(1), nullptr, 16);
  return {static_cast<int>(v >> 16 & 255), static_cast<int>(v >> 8 & 255), static_cast<int>(v & 255)};
}

struct Picture {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  Rgb at(int x, int y) const {
    const uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
    return {p[0], p[1], p[2]};
  }
  bool dark(int x, int y) const {
    const Rgb c = at(x, y);
    return std::max({c.r, c.g, c.b}) < 110;
  }
  // Within 24 of the colour on every channel: the colour drawn opaque (anti-aliased edges and the
  // faint per-step lines, blended with white, are further off).
  bool is(int x, int y, const Rgb& c) const {
    const Rgb p = at(x, y);
    return std::abs(p.r - c.r) < 24 && std::abs(p.g - c.g) < 24 && std::abs(p.b - c.b) < 24;
  }
};

// rsvg-convert renders the SVG at `zoom`; libpng reads the PNG back as 8-bit RGB over white.
Picture render(const std::string& svg, double zoom, std::string* png_path = nullptr) {
  const std::string png = svg + ".png";
  std::string out;
  EXPECT_EQ(test::run_command("rsvg-convert -z " + std::to_string(zoom) + " -b white " + svg + " -o " + png, &out), 0)
      << out;
  if (png_path) *png_path = png;
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  Picture p;
  if (!png_image_begin_read_from_file(&image, png.c_str())) {
    ADD_FAILURE() << png << ": " << image.message;
    return p;
  }
  image.format = PNG_FORMAT_RGB;
  p.width = static_cast<int>(image.width);
  p.height = static_cast<int>(image.height);
  p.rgb.resize(PNG_IMAGE_SIZE(image));
  const png_color white{255, 255, 255};
  EXPECT_TRUE(png_image_finish_read(&image, &white, p.rgb.data(), 0, nullptr)) << image.message;
  return p;
}

// The text a person would read off the picture.
std::string read_text(const std::string& png) {
  std::string out;
  EXPECT_EQ(test::run_command("tesseract " + png + " stdout 2>/dev/null", &out), 0) << out;
  return out;
}

// A panel as its axes show it: the left axis (a long dark vertical line) and the x axis (a long
// dark horizontal line) meeting at the bottom-left corner.
struct Frame {
  int left, right, top, bottom;
  int width() const { return right - left; }
  int height() const { return bottom - top; }
};

std::vector<Frame> find_frames(const Picture& p) {
  std::vector<Frame> frames;
  for (int y = 0; y < p.height; ++y) {
    int best_start = 0, best_length = 0;
    for (int x = 0, run = 0; x < p.width; ++x) {
      run = p.dark(x, y) ? run + 1 : 0;
      if (run > best_length) best_length = run, best_start = x - run + 1;
    }
    if (best_length < p.width / 2) continue;
    if (!frames.empty() && y - frames.back().bottom <= 3) continue;  // the same line, a row lower
    Frame f{best_start, best_start + best_length - 1, y, y};
    // Up the left axis while it stays dark (a column or two right of its start, past anti-aliasing).
    int column = best_start + 1;
    while (f.top > 0 && (p.dark(column, f.top - 1) || p.dark(column - 1, f.top - 1))) --f.top;
    if (f.height() > 40) frames.push_back(f);
  }
  return frames;
}

struct Trace {
  int pixels = 0;
  double mean_y = 0;  // as a fraction of the frame's height from its top
};

// Pixels of one colour inside a frame, in a band of columns given as fractions of its width.
Trace trace(const Picture& p, const Frame& f, const Rgb& c, double from, double to) {
  Trace t;
  double sum = 0;
  for (int x = f.left + 3 + static_cast<int>(from * (f.width() - 3));
       x < f.left + 3 + static_cast<int>(to * (f.width() - 3)); ++x)
    for (int y = f.top; y < f.bottom - 2; ++y)
      if (p.is(x, y, c)) {
        ++t.pixels;
        sum += static_cast<double>(y - f.top) / f.height();
      }
  t.mean_y = t.pixels ? sum / t.pixels : NAN;
  return t;
}

// The columns of a frame where a colour is drawn, as step numbers on an x axis from 0 to `last`.
std::vector<double> columns_as_steps(const Picture& p, const Frame& f, const Rgb& c, double last) {
  std::vector<double> steps;
  for (int x = f.left + 2; x <= f.right; ++x)
    for (int y = f.top; y < f.bottom - 2; ++y)
      if (p.is(x, y, c)) {
        steps.push_back(static_cast<double>(x - f.left) / f.width() * last);
        break;
      }
  return steps;
}

TEST(SvgChart, AxesCurvesAndLegendAreDrawnWhereAPersonLooks) {
  const std::string dir = test::temp_dir("svg_chart");
  Chart chart;
  chart.title = "two curves";
  chart.x_label = "step";
  ChartPanel panel{"value", false, 380, {}};
  ChartSeries falling{kBlue, ChartMark::kLine, 3, 1, {}, {}}, rising{kOrange, ChartMark::kLine, 3, 1, {}, {}};
  for (int i = 0; i <= 100; ++i) {
    falling.x.push_back(i);
    falling.y.push_back(10 - 0.08 * i);
    rising.x.push_back(i);
    rising.y.push_back(i == 50 ? NAN : 2 + 0.08 * i);  // a gap, not a line to zero
  }
  panel.series = {falling, rising};
  chart.panels.push_back(panel);
  chart.legend = {{kBlue, ChartMark::kLine, "falling curve"}, {kOrange, ChartMark::kLine, "rising curve"}};
  write_chart_svg(chart, dir + "/c.svg");

  std::string png;
  const Picture p = render(dir + "/c.svg", 1, &png);
  const auto frames = find_frames(p);
  ASSERT_EQ(frames.size(), 1u);
  const Frame& f = frames[0];
  EXPECT_GT(f.width(), p.width * 3 / 4);
  EXPECT_GT(f.height(), 300);
  // The data spans 2..10 on an axis rounded to whole ticks (2..10): each curve runs corner to corner.
  const Trace blue_start = trace(p, f, parse_colour(kBlue), 0, 0.05),
              blue_end = trace(p, f, parse_colour(kBlue), 0.95, 1);
  const Trace orange_start = trace(p, f, parse_colour(kOrange), 0, 0.05),
              orange_end = trace(p, f, parse_colour(kOrange), 0.95, 1);
  ASSERT_GT(blue_start.pixels, 10);
  ASSERT_GT(orange_end.pixels, 10);
  EXPECT_LT(blue_start.mean_y, 0.1);
  EXPECT_GT(blue_end.mean_y, 0.9);
  EXPECT_GT(orange_start.mean_y, 0.9);
  EXPECT_LT(orange_end.mean_y, 0.1);
  // The gap at x = 50: no orange in the columns around it, blue there.
  EXPECT_EQ(trace(p, f, parse_colour(kOrange), 0.495, 0.505).pixels, 0);
  EXPECT_GT(trace(p, f, parse_colour(kBlue), 0.495, 0.505).pixels, 0);
  // The curves stay inside the frame: nothing blue among the x axis's tick labels.
  for (int y = f.bottom + 3; y < f.bottom + 40; ++y)
    for (int x = 0; x < p.width; ++x) ASSERT_FALSE(p.is(x, y, parse_colour(kBlue))) << x << "," << y;

  render(dir + "/c.svg", 2, &png);
  const std::string text = read_text(png);
  for (const char* words : {"two curves", "falling curve", "rising curve", "step", "value"})
    EXPECT_NE(text.find(words), std::string::npos) << words << " not read in:\n" << text;
}

TEST(SvgChart, Log2PanelTicksArePowersOfTwo) {
  const std::string dir = test::temp_dir("svg_chart_log2");
  Chart chart;
  chart.title = "scale";
  ChartPanel panel{"loss scale", true, 200, {}};
  panel.series.push_back({kOrange, ChartMark::kStepLine, 2, 1, {1, 10, 20}, {65536, 32768, 65536}});
  chart.panels.push_back(panel);
  write_chart_svg(chart, dir + "/s.svg");
  std::string png;
  render(dir + "/s.svg", 2, &png);
  const std::string text = read_text(png);
  for (const char* tick : {"16384", "32768", "65536", "131072"})
    EXPECT_NE(text.find(tick), std::string::npos) << tick << " not read in:\n" << text;
}

// A run's history made up for the picture: loss falling from `from` to `to`, skipped steps where
// asked, the loss scale halved at each of them.
TrainResult made_up_run(int steps, double from, double to, const std::vector<int>& skips, bool scaled) {
  TrainResult r;
  double scale = 65536;
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.03);
  for (int s = 1; s <= steps; ++s) {
    const bool skipped = std::find(skips.begin(), skips.end(), s) != skips.end();
    r.history.steps.push_back({s, from + (to - from) * s / steps + noise(rng), scaled ? scale : 0, skipped});
    if (skipped) scale /= 2;
  }
  r.history.validations = {{steps / 2, (from + to) / 2, 0.5}, {steps, to, 0.75}};
  r.seconds_per_step = 0.0125;
  r.backend_peak_bytes = size_t{3} << 20;
  r.val_accuracy = 0.75;
  r.skipped = static_cast<int64_t>(skips.size());
  return r;
}

TEST(TrainingPlot, SkippedStepsAreRedCrossesAndTheLossScaleDropsThere) {
  const std::string dir = test::temp_dir("training_plot_skips");
  const TrainResult fp32 = made_up_run(200, 2.3, 0.5, {}, false), fp16 = made_up_run(200, 2.3, 0.6, {60, 140}, true);
  write_chart_svg(training_chart("made-up runs", {{"fp32", fp32}, {"fp16", fp16}}), dir + "/p.svg");
  std::string png;
  const Picture p = render(dir + "/p.svg", 2, &png);
  const auto frames = find_frames(p);
  ASSERT_EQ(frames.size(), 2u) << "a loss panel and a loss-scale panel";
  const Frame &loss = frames[0], &scale = frames[1];
  EXPECT_GT(loss.height(), scale.height());

  // Red crosses at steps 60 and 140, on the loss panel, nowhere else.
  const auto red = columns_as_steps(p, loss, parse_colour(kRed), 200);
  ASSERT_FALSE(red.empty());
  for (double s : red) EXPECT_TRUE(std::fabs(s - 60) < 4 || std::fabs(s - 140) < 4) << s;
  EXPECT_TRUE(std::any_of(red.begin(), red.end(), [](double s) { return std::fabs(s - 60) < 4; }));
  EXPECT_TRUE(std::any_of(red.begin(), red.end(), [](double s) { return std::fabs(s - 140) < 4; }));
  EXPECT_EQ(trace(p, scale, parse_colour(kRed), 0, 1).pixels, 0);

  // The loss scale (fp16 only: fp32 has none) in three levels, dropping right after each skip.
  EXPECT_EQ(trace(p, scale, parse_colour(kBlue), 0, 1).pixels, 0);
  const double before = trace(p, scale, parse_colour(kOrange), 0.05, 0.28).mean_y,
               between = trace(p, scale, parse_colour(kOrange), 0.32, 0.68).mean_y,
               after = trace(p, scale, parse_colour(kOrange), 0.72, 0.98).mean_y;
  EXPECT_LT(before, between - 0.05);
  EXPECT_LT(between, after - 0.05);
  // Powers of two are evenly spaced on a log2 axis: 65536 -> 32768 -> 16384 are equal drops.
  EXPECT_NEAR(between - before, after - between, 0.02);

  const std::string text = read_text(png);
  for (const char* words : {"made-up runs", "fp32: 12.5 ms/step", "fp16: 12.5 ms/step", "3.0 MiB", "2 skipped",
                            "val accuracy 75.00%", "skipped step", "validation loss", "loss scale"})
    EXPECT_NE(text.find(words), std::string::npos) << words << " not read in:\n" << text;
}

// Images whose class is their brightness, so a small model learns them within a few epochs and
// the loss visibly falls.
void write_learnable_data(const std::string& path, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(0, 0.05f);
  Tensor x(DType::kFloat, {n, 1, 28, 28});
  Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = static_cast<int64_t>(rng() % 10);
    y.mutable_as<int64_t>()[i] = label;
    for (int64_t k = 0; k < 784; ++k) x.mutable_as<float>()[i * 784 + k] = static_cast<float>(label) / 10 + noise(rng);
  }
  write_npz(path, {{"input", x}, {"labels", y}});
}

TEST(TrainingPlot, CompareFp32DrawsBothRunsBesideTheMetrics) {
  const std::string dir = test::temp_dir("training_plot_compare");
  write_learnable_data(dir + "/train.npz", 512, 3);
  write_learnable_data(dir + "/val.npz", 128, 4);
  std::string out;
  ASSERT_EQ(test::run_command(
                test::binary_dir() + "/amp-train " + test::source_dir() + "/models/mlp.train.onnx --data " + dir +
                    "/train.npz --val " + dir + "/val.npz --loss cross_entropy --batch-size 16 " +
                    "--epochs 3 --optimizer adamw --lr 0.003 --dtype fp16 --compare-fp32 --metrics " + dir + "/m.jsonl",
                &out),
            0)
      << out;
  EXPECT_NE(out.find("loss curves drawn in " + dir + "/m.svg"), std::string::npos) << out;
  std::string png;
  const Picture p = render(dir + "/m.svg", 2, &png);
  const auto frames = find_frames(p);
  ASSERT_EQ(frames.size(), 2u) << "fp16 scales its loss: a loss-scale panel under the loss";
  const Frame& loss = frames[0];
  // Both curves start near the top-left and fall: the first tenth of the steps sits high in the
  // panel, the last tenth low.
  for (const char* colour : {kBlue, kOrange}) {
    const Trace start = trace(p, loss, parse_colour(colour), 0, 0.1),
                end = trace(p, loss, parse_colour(colour), 0.9, 1);
    ASSERT_GT(start.pixels, 20) << colour;
    ASSERT_GT(end.pixels, 20) << colour;
    EXPECT_LT(start.mean_y, 0.35) << colour;
    EXPECT_GT(end.mean_y, start.mean_y + 0.3) << colour;
  }
  EXPECT_GT(trace(p, frames[1], parse_colour(kOrange), 0, 1).pixels, 100);

  const std::string text = read_text(png);
  // (The title's bold "mlp" is read as "mlip" at times: the words after it are enough. The legend's
  // "fp32:" was once read as "f032:" on a loaded machine, and once as "fp32:5.0" without its space:
  // its line is found by what follows the label.)
  for (const char* words :
       {"train.onnx: fp32 vs fp16 mixed precision", "32:", "fp16:", "ms/step", "MiB backend memory", "val accuracy",
        "validation loss", "training loss", "loss scale", "optimizer step"})
    EXPECT_NE(text.find(words), std::string::npos) << words << " not read in:\n" << text;
  size_t lines = 0;
  for (size_t at = text.find("ms/step"); at != std::string::npos; at = text.find("ms/step", at + 1)) ++lines;
  EXPECT_EQ(lines, 2u) << "one legend line a run:\n" << text;
}

TEST(TrainingPlot, PlotFolderIsCheckedBeforeTraining) {
  const std::string dir = test::temp_dir("training_plot_folder");
  write_learnable_data(dir + "/train.npz", 64, 3);
  std::string out;
  EXPECT_EQ(
      test::run_command(test::binary_dir() + "/amp-train " + test::source_dir() + "/models/mlp.train.onnx --data " +
                            dir + "/train.npz --loss cross_entropy --plot " + dir + "/missing/p.svg",
                        &out),
      2)
      << out;
  EXPECT_NE(out.find("amp-train: error: " + dir + "/missing/p.svg: no such directory"), std::string::npos) << out;
  EXPECT_EQ(out.find("training "), std::string::npos) << "trained before failing:\n" << out;
}

}  // namespace
}  // namespace amp
