#include "frontends/lib/training_progress.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace amp {

namespace {

std::string clock_text(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  return buf;
}

}  // namespace

TrainingProgress::TrainingProgress(int64_t total, bool quiet)
    : total_(std::max<int64_t>(total, 1)),
      quiet_(quiet),
      tty_(isatty(STDERR_FILENO) != 0),
      every_(std::max<int64_t>(1, std::min<int64_t>(100, total_ / 20))) {}

void TrainingProgress::step(int64_t done, double loss, double samples_per_second, double loss_scale,
                            int64_t skipped) {
  if (quiet_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : 0;
  std::string scale = loss_scale > 0 ? fmt::format(" scale {:g}", loss_scale) : "";
  std::string skips = skipped > 0 ? fmt::format(" skipped {}", skipped) : "";
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total_);
    std::string bar(static_cast<size_t>(filled), '=');
    if (filled < kWidth) bar += '>';
    bar.resize(kWidth, ' ');
    std::fprintf(stderr, "\r[%s] %lld/%lld loss %.4f %.0f samples/s%s%s ETA %s\033[K", bar.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), loss, samples_per_second, scale.c_str(),
                 skips.c_str(), clock_text(eta).c_str());
    std::fflush(stderr);
    drawn_ = true;
  } else if (done % every_ == 0 || done == total_) {
    spdlog::info("step {}/{} loss {:.4f} {:.0f} samples/s{}{} ETA {}", done, total_, loss, samples_per_second, scale,
                 skips, clock_text(eta));
  }
}

void TrainingProgress::note(const std::string& line) {
  if (quiet_) return;
  if (drawn_) std::fprintf(stderr, "\r\033[K");
  spdlog::info("{}", line);
}

void TrainingProgress::finish() {
  if (!quiet_ && drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace amp
