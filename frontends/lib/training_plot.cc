#include "frontends/lib/training_plot.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>

namespace amp {

namespace {

// Blue and orange, told apart with either kind of red-green colour blindness; red is kept for
// the skipped steps.
const char* const kRunColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"};
constexpr const char* kSkipColour = "#d62728";
constexpr const char* kNeutralColour = "#555555";
// Per-step losses jump with every batch; a mean over 1/20 of the run draws the trend under them.
constexpr size_t kMeanWindowsPerRun = 20;

// Centred mean over `window` steps (fewer at the ends), of the finite values only.
std::vector<double> running_mean(const std::vector<double>& v, size_t window) {
  std::vector<double> out(v.size(), NAN);
  const size_t half = window / 2;
  for (size_t i = 0; i < v.size(); ++i) {
    double sum = 0;
    int count = 0;
    for (size_t j = i > half ? i - half : 0; j <= std::min(v.size() - 1, i + half); ++j)
      if (std::isfinite(v[j])) sum += v[j], ++count;
    if (count) out[i] = sum / count;
  }
  return out;
}

std::string figures_text(const PlottedRun& run) {
  const TrainResult& r = run.result;
  std::string text = fmt::format("{}: {:.1f} ms/step, {:.1f} MiB backend memory", run.label, r.seconds_per_step * 1e3,
                                 static_cast<double>(r.backend_peak_bytes) / (1024.0 * 1024.0));
  if (r.val_accuracy >= 0)
    text += fmt::format(", val accuracy {:.2f}%", r.val_accuracy * 100);
  else if (r.val_loss >= 0)
    text += fmt::format(", val loss {:.4f}", r.val_loss);
  return text + fmt::format(", {} skipped", r.skipped);
}

}  // namespace

Chart training_chart(const std::string& title, const std::vector<PlottedRun>& runs) {
  Chart chart;
  chart.title = title;
  chart.x_label = "optimizer step";
  ChartPanel loss{"training loss", false, 380, {}}, scale{"loss scale", true, 150, {}};
  size_t window = 1;
  bool any_validation = false, any_skipped = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const TrainingHistory& h = runs[i].result.history;
    const std::string colour = kRunColours[i % std::size(kRunColours)];
    // The first run's mean is drawn wider, under the others: where the curves agree, it shows as a rim.
    const double mean_width = i == 0 ? 5 : 2.5;
    ChartSeries each{colour, ChartMark::kLine, 1.2, 0.3, {}, {}}, mean{colour, ChartMark::kLine, mean_width, 1, {}, {}},
        scales{colour, ChartMark::kStepLine, 2, 1, {}, {}}, validation{colour, ChartMark::kDots, 1, 1, {}, {}},
        skipped{kSkipColour, ChartMark::kCrosses, 2.5, 1, {}, {}};
    for (const TrainingHistory::Step& s : h.steps) {
      each.x.push_back(static_cast<double>(s.step));
      each.y.push_back(s.loss);
      if (s.loss_scale > 0) {
        scales.x.push_back(static_cast<double>(s.step));
        scales.y.push_back(s.loss_scale);
      }
    }
    window = std::max<size_t>(1, h.steps.size() / kMeanWindowsPerRun) | 1;
    mean.x = each.x;
    mean.y = running_mean(each.y, window);
    for (size_t k = 0; k < h.steps.size(); ++k)
      if (h.steps[k].skipped) {
        skipped.x.push_back(mean.x[k]);
        skipped.y.push_back(mean.y[k]);
      }
    for (const TrainingHistory::Validation& v : h.validations) {
      validation.x.push_back(static_cast<double>(v.step));
      validation.y.push_back(v.loss);
    }
    any_validation = any_validation || !validation.x.empty();
    any_skipped = any_skipped || !skipped.x.empty();
    loss.series.push_back(std::move(each));
    loss.series.push_back(std::move(mean));
    loss.series.push_back(std::move(validation));
    loss.series.push_back(std::move(skipped));
    if (!scales.x.empty()) scale.series.push_back(std::move(scales));
    chart.legend.push_back({colour, ChartMark::kLine, figures_text(runs[i])});
  }
  chart.panels.push_back(std::move(loss));
  if (!scale.series.empty()) chart.panels.push_back(std::move(scale));
  chart.legend.push_back({kNeutralColour, ChartMark::kLine,
                          fmt::format("thin: the loss of each step; bold: its mean over {} steps", window)});
  if (any_validation)
    chart.legend.push_back(
        {kNeutralColour, ChartMark::kDots, "validation loss (--val), after each epoch and at the end"});
  if (any_skipped)
    chart.legend.push_back({kSkipColour, ChartMark::kCrosses, "skipped step: inf/NaN gradients, no update applied"});
  return chart;
}

}  // namespace amp
