// amp-train's progress as a person sees it. On a terminal: amp-train runs inside tmux (a real
// terminal emulator, wrapping and cursor movement included), under util-linux's `script` so the
// bytes it wrote are kept as well; the test reads tmux's screen afterwards. Not on a terminal:
// plain periodic lines without control characters.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "frontends/lib/npz.h"
#include "tests/support/test_support.h"

namespace amp {
namespace {

void write_data(const std::string& path, int64_t n) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0, 1);
  Tensor x(DType::kFloat, {n, 1, 28, 28});
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_as<float>()[i] = u(rng);
  Tensor y(DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) y.mutable_as<int64_t>()[i] = static_cast<int64_t>(rng() % 10);
  write_npz(path, {{"input", x}, {"labels", y}});
}

std::vector<std::string> rows_of(const std::string& text) {
  std::vector<std::string> rows;
  std::istringstream in(text);
  for (std::string row; std::getline(in, row);)
    if (!row.empty()) rows.push_back(row);
  return rows;
}

struct Terminal {
  std::string screen;  // the rows tmux shows when the command has ended, history included
  std::string bytes;   // what the command wrote to the terminal
  int exit_code = -1;
};

// Runs `command` in a detached tmux session of `columns` columns and waits for it to end.
Terminal run_in_terminal(const std::string& command, int columns, const std::string& dir) {
  const std::string tmux = "tmux -S " + dir + "/tmux.socket";
  const std::string inner =
      "script -qfec '" + command + "' " + dir + "/bytes.log; echo \\$? > " + dir + "/exit_code; sleep 600";
  std::string out;
  EXPECT_EQ(
      test::run_command(tmux + " new-session -d -x " + std::to_string(columns) + " -y 60 \"" + inner + "\"", &out), 0)
      << out;
  Terminal t;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (!std::filesystem::exists(dir + "/exit_code") || test::read_file(dir + "/exit_code").empty()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "the command did not end within 3 minutes";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // script's -f flushes as the command writes; give tmux a moment to draw the last bytes.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(test::run_command(tmux + " capture-pane -p -S -1000 -t 0", &t.screen), 0) << t.screen;
  test::run_command(tmux + " kill-server", &out);
  t.bytes = test::read_file(dir + "/bytes.log");
  t.exit_code = std::atoi(test::read_file(dir + "/exit_code").c_str());
  return t;
}

std::string train_command(const std::string& dir, const std::string& flags) {
  return test::binary_dir() + "/amp-train " + test::source_dir() + "/models/cnn.train.onnx --data " + dir +
         "/train.npz --val " + dir + "/val.npz --loss cross_entropy --batch-size 16 --dtype fp16 --seed 2 " + flags;
}

class TrainingProgress : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_data(dir_ + "/train.npz", 512);
    write_data(dir_ + "/val.npz", 64);
  }
  std::string dir_;
};

TEST_F(TrainingProgress, OnATerminalOneLineIsRedrawnInPlace) {
  // 512 samples / 16 = 32 steps an epoch; 3 epochs, validated after each.
  const Terminal t = run_in_terminal(train_command(dir_, "--epochs 3"), 120, dir_);
  ASSERT_EQ(t.exit_code, 0) << t.screen;
  const std::regex finished(R"(^\[=+\] 96/96 loss \d+\.\d{4} \d+ samples/s scale \d+ skipped \d+ ETA 0:00:00$)");
  int progress_rows = 0, finished_rows = 0;
  std::vector<std::string> notes;
  for (const std::string& row : rows_of(t.screen)) {
    progress_rows += row.find("/96 loss") != std::string::npos;
    finished_rows += std::regex_search(row, finished);
    if (row.rfind("info: ", 0) == 0) notes.push_back(row);
  }
  EXPECT_EQ(progress_rows, 1) << t.screen;
  EXPECT_EQ(finished_rows, 1) << t.screen;
  // The lines that must not be overdrawn are there, whole, in order.
  ASSERT_EQ(notes.size(), 4u) << t.screen;
  EXPECT_EQ(notes[0].rfind("info: training 96 steps of 16 samples: 3 epochs of 512 samples", 0), 0u) << notes[0];
  for (int epoch = 1; epoch <= 3; ++epoch)
    EXPECT_TRUE(std::regex_match(notes[epoch], std::regex("info: epoch " + std::to_string(epoch) + " step " +
                                                          std::to_string(32 * epoch) +
                                                          R"(: val_loss \d+\.\d{4} val_accuracy \d\.\d{4})")))
        << notes[epoch];
  // The one row was drawn again and again: carriage returns in front of intermediate steps. The
  // line is redrawn at most ten times a second, and always at the first step and at the step after
  // each validation line (which cleared it): steps 1, 33 and 65 at least, however fast the steps run.
  const std::regex redraw(R"(\r\[[=> ]+\] (\d+)/96 )");
  int redraws = 0;
  for (auto it = std::sregex_iterator(t.bytes.begin(), t.bytes.end(), redraw); it != std::sregex_iterator(); ++it)
    redraws += std::stoi((*it)[1]) < 96;
  EXPECT_GE(redraws, 3) << t.bytes;
}

TEST_F(TrainingProgress, ANarrowTerminalKeepsTheLineToOneRow) {
  // The full line is about 70 columns; in 48 the bar goes and the end is cut. Were it wider than
  // the terminal, every redraw would leave a wrapped row behind.
  const Terminal t = run_in_terminal(train_command(dir_, ""), 48, dir_);
  ASSERT_EQ(t.exit_code, 0) << t.screen;
  int progress_rows = 0;
  for (const std::string& row : rows_of(t.screen))
    if (row.find("/32") != std::string::npos) {
      ++progress_rows;
      EXPECT_EQ(row.rfind("32/32 loss ", 0), 0u) << row;
      EXPECT_LT(row.size(), 48u) << row;
    }
  EXPECT_EQ(progress_rows, 1) << t.screen;
}

TEST_F(TrainingProgress, NotATerminalPlainLinesEveryFewSteps) {
  std::string out;
  ASSERT_EQ(test::run_command(train_command(dir_, "--steps 40"), &out), 0) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.find('\033'), std::string::npos);
  // 40 steps: a line every 2 (a twentieth of the run), the last one included.
  std::vector<int> steps;
  const std::regex line(R"(info: step (\d+)/40 loss \d+\.\d{4} \d+ samples/s scale \d+ skipped \d+ ETA \d+:\d\d:\d\d)");
  for (const std::string& row : rows_of(out)) {
    std::smatch m;
    if (std::regex_match(row, m, line)) steps.push_back(std::stoi(m[1]));
  }
  ASSERT_EQ(steps.size(), 20u) << out;
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i], 2 * static_cast<int>(i + 1));
}

}  // namespace
}  // namespace amp
