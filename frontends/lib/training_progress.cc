#include "frontends/lib/training_progress.h"

#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace amp {

namespace {

// A terminal's own drawing is slower than a small model's step (the CPU runs the MLP's in about a
// millisecond); ten redraws a second read as continuous, as tqdm's default 0.1 s interval does.
constexpr double kRedrawSeconds = 0.1;
constexpr int kBarWidth = 30, kNarrowestBar = 10;

std::string clock_text(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

// A line as wide as the terminal or wider wraps, and "\r" then returns only to the start of its
// last row: every redraw would leave a row behind.
size_t terminal_columns() {
  struct winsize w {};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 80;
}

}  // namespace

TrainingProgress::TrainingProgress(int64_t total, bool quiet, std::string label)
    : total_(std::max<int64_t>(total, 1)),
      quiet_(quiet),
      tty_(isatty(STDERR_FILENO) != 0),
      prefix_(label.empty() ? "" : label + " "),
      every_(std::max<int64_t>(1, std::min<int64_t>(100, total_ / 20))) {}

void TrainingProgress::step(int64_t done, double loss, double samples_per_second, double loss_scale, int64_t skipped) {
  if (quiet_) return;
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : 0;
  // A run without a loss scale (fp32, bf16) shows only its skipped steps, once there are some.
  std::string scaling = loss_scale > 0 ? fmt::format(" scale {:g}", loss_scale) : "";
  if (loss_scale > 0 || skipped > 0) scaling += fmt::format(" skipped {}", skipped);
  const std::string figures = fmt::format("{}/{} loss {:.4f} {:.0f} samples/s{} ETA {}", done, total_, loss,
                                          samples_per_second, scaling, clock_text(eta));
  if (!tty_) {
    if (done % every_ == 0 || done == total_) spdlog::info("{}step {}", prefix_, figures);
    return;
  }
  if (drawn_ && done < total_ && std::chrono::duration<double>(now - last_draw_).count() < kRedrawSeconds) return;
  last_draw_ = now;
  // The bar gives way first, then the end of the figures: the line stays one row.
  const size_t room = terminal_columns() - 1;
  std::string line = prefix_;
  const size_t bar = std::min<size_t>(
      kBarWidth, room > prefix_.size() + figures.size() + 3 ? room - prefix_.size() - figures.size() - 3 : 0);
  if (bar >= kNarrowestBar) {
    const size_t filled = bar * static_cast<size_t>(done) / static_cast<size_t>(total_);
    std::string drawn(filled, '=');
    if (filled < bar) drawn += '>';
    drawn.resize(bar, ' ');
    line += "[" + drawn + "] ";
  }
  line += figures;
  if (line.size() > room) line.resize(room);
  // The last step's line stays on the screen as the run's record, as tqdm leaves its bar.
  std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), done == total_ ? "\n" : "");
  std::fflush(stderr);
  drawn_ = done < total_;
}

void TrainingProgress::note(const std::string& line) {
  if (quiet_) return;
  if (drawn_) std::fprintf(stderr, "\r\033[K");
  spdlog::info("{}{}", prefix_, line);
  // Redraw at the next step whatever the interval: the line was just cleared.
  drawn_ = false;
}

void TrainingProgress::finish() {
  if (!quiet_ && drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace amp
