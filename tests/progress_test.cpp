// progress_test.cpp: the progress line (tiny/progress.h). Only what is deterministic is
// checked: the text for given numbers, and when each mode draws, with a fake clock in place of
// the real one. No test here depends on how fast the machine is.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "tiny/error.h"
#include "tiny/progress.h"

namespace tiny {
namespace {

// Sets TINY_PROGRESS for one test and restores what was there.
class ProgressEnv {
 public:
  explicit ProgressEnv(const char* value) {
    if (const char* old = std::getenv("TINY_PROGRESS")) old_ = old;
    if (value) ::setenv("TINY_PROGRESS", value, 1);
    else ::unsetenv("TINY_PROGRESS");
  }
  ~ProgressEnv() {
    if (old_) ::setenv("TINY_PROGRESS", old_->c_str(), 1);
    else ::unsetenv("TINY_PROGRESS");
  }

 private:
  std::optional<std::string> old_;
};

// Options writing to `out` in `mode`, with time given by `*now`.
ProgressOptions fake(std::ostringstream& out, ProgressMode mode, const double* now) {
  ProgressOptions o;
  o.mode = mode;
  o.stream = &out;
  o.clock = [now] { return *now; };
  return o;
}

size_t count(const std::string& s, char c) {
  size_t n = 0;
  for (char x : s) n += x == c;
  return n;
}

TEST(Progress, FormatsDurationsAsTqdm) {
  EXPECT_EQ(format_duration(0), "00:00");
  EXPECT_EQ(format_duration(12.9), "00:12");  // whole seconds, the fraction dropped
  EXPECT_EQ(format_duration(65), "01:05");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(1.0 / 0.0), "?");
}

TEST(Progress, FormatsTheLineFromGivenNumbers) {
  EXPECT_EQ(format_progress("train", 420, 1000, 0.1234, 12.0),
            "train:  42%|########            | 420/1000 [00:12<00:16, 35.00it/s, loss=0.1234]");
  EXPECT_EQ(format_progress("train", 1000, 1000, 2.5e-5, 100.0, 10),
            "train: 100%|##########| 1000/1000 [01:40<00:00, 10.00it/s, loss=2.5e-05]");
  // Slower than a step a second: seconds per step, as tqdm shows it.
  EXPECT_EQ(format_progress("", 2, 10, std::nullopt, 5.0, 0), " 20% 2/10 [00:05<00:20, 2.50s/it]");
  // Before the first step (or the first tick of the clock) there is no rate to show.
  EXPECT_EQ(format_progress("eval", 0, 3, std::nullopt, 0.0, 3),
            "eval:   0%|   | 0/3 [00:00<?, ?it/s]");
  EXPECT_THROW(format_progress("x", 1, 0, std::nullopt, 1.0), ValueError);
  EXPECT_THROW(format_progress("x", 4, 3, std::nullopt, 1.0), ValueError);
  EXPECT_THROW(format_progress("x", -1, 3, std::nullopt, 1.0), ValueError);
}

TEST(Progress, ResolvesItsModeFromTheStreamAndTinyProgress) {
  {
    ProgressEnv env(nullptr);
    EXPECT_EQ(resolve_progress_mode(ProgressMode::Auto, true), ProgressMode::Terminal);
    EXPECT_EQ(resolve_progress_mode(ProgressMode::Auto, false), ProgressMode::Off);
    EXPECT_EQ(resolve_progress_mode(ProgressMode::Plain, false), ProgressMode::Plain);
  }
  {
    ProgressEnv env("plain");
    EXPECT_EQ(resolve_progress_mode(ProgressMode::Auto, true), ProgressMode::Plain);
    EXPECT_EQ(resolve_progress_mode(ProgressMode::Terminal, false), ProgressMode::Terminal);
  }
  for (const char* off : {"0", "off", "false"}) {
    ProgressEnv env(off);
    EXPECT_EQ(resolve_progress_mode(ProgressMode::Terminal, true), ProgressMode::Off) << off;
    EXPECT_EQ(resolve_progress_mode(ProgressMode::Plain, true), ProgressMode::Off) << off;
  }
}

// Not a terminal (any stream but the default is treated as not one): Auto prints nothing, so a
// chapter's captured output never holds a timing.
TEST(Progress, IsQuietWhenNotATerminal) {
  ProgressEnv env(nullptr);
  std::ostringstream out;
  double now = 0;
  {
    Progress bar(100, "train", fake(out, ProgressMode::Auto, &now));
    EXPECT_EQ(bar.mode(), ProgressMode::Off);
    for (int64_t t = 1; t <= 100; ++t) bar.update(t, 1.0);
  }
  EXPECT_EQ(out.str(), "");
}

TEST(Progress, PlainModePrintsALineEveryTenPercent) {
  ProgressEnv env(nullptr);
  std::ostringstream out;
  double now = 0;
  {
    Progress bar(1000, "train", fake(out, ProgressMode::Plain, &now));
    for (int64_t t = 1; t <= 1000; ++t) {
      now = 0.01 * static_cast<double>(t);  // 100 steps a second
      bar.update(t, 1.0 / static_cast<double>(t));
    }
  }
  const std::string s = out.str();
  EXPECT_EQ(count(s, '\n'), 10u);
  EXPECT_EQ(count(s, '\r'), 0u);
  EXPECT_EQ(s.substr(0, s.find('\n')),
            "train:  10%|##                  | 100/1000 [00:01<00:09, 100.00it/s, loss=0.01]");
  EXPECT_NE(s.find("train: 100%|####################| 1000/1000 [00:10<00:00, 100.00it/s, "
                   "loss=0.001]\n"),
            std::string::npos);
}

// Terminal mode redraws in place ('\r') at most every 0.1 s of the (fake) clock, however many
// updates arrive, and ends the line once when closed.
TEST(Progress, TerminalModeRedrawsInPlaceAtMostTenTimesASecond) {
  ProgressEnv env(nullptr);
  std::ostringstream out;
  double now = 0;
  Progress bar(1000, "train", fake(out, ProgressMode::Terminal, &now));
  for (int64_t t = 1; t <= 999; ++t) {
    now = 0.001 * static_cast<double>(t);  // 1000 steps a second: ~1 s in all
    bar.update(t);
  }
  // The first update draws, then one every 0.1 s: at 0.001, 0.101, ..., 0.901 s.
  EXPECT_EQ(count(out.str(), '\r'), 10u);
  EXPECT_EQ(count(out.str(), '\n'), 0u);
  bar.update(1000, 0.5);  // the last step is always drawn
  bar.close();
  bar.close();  // once only
  const std::string s = out.str();
  EXPECT_EQ(count(s, '\r'), 12u);  // the last step, and close()'s final draw
  EXPECT_EQ(count(s, '\n'), 1u);
  EXPECT_EQ(s.substr(s.rfind('\r') + 1),
            "train: 100%|####################| 1000/1000 [00:00<00:00, 1001.00it/s, loss=0.5]\n");
}

TEST(Progress, WriteWipesTheBarPrintsTheLineAndRedrawsIt) {
  ProgressEnv env(nullptr);
  std::ostringstream out;
  double now = 0;
  Progress bar(10, "train", fake(out, ProgressMode::Terminal, &now));
  bar.update(1, 2.0);
  const std::string drawn = out.str();  // "\rtrain:  10%|..."
  ::testing::internal::CaptureStdout();
  bar.write("step 1: loss 2.0");
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "step 1: loss 2.0\n");
  // After the first draw: a carriage return, blanks over the old line, a carriage return, then
  // the bar again, so the text sits above an intact bar.
  const std::string after = out.str().substr(drawn.size());
  EXPECT_EQ(after.substr(0, drawn.size() + 1), "\r" + std::string(drawn.size() - 1, ' ') + "\r");
  EXPECT_EQ(after.substr(drawn.size() + 1), drawn);
  // Not on a terminal: only the text.
  std::ostringstream quiet;
  Progress off(10, "train", fake(quiet, ProgressMode::Off, &now));
  ::testing::internal::CaptureStdout();
  off.write("hello");
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "hello\n");
  EXPECT_EQ(quiet.str(), "");
}

TEST(Progress, ChecksItsArguments) {
  std::ostringstream out;
  double now = 0;
  EXPECT_THROW(Progress(0, "x", fake(out, ProgressMode::Plain, &now)), ValueError);
  ProgressOptions bad = fake(out, ProgressMode::Plain, &now);
  bad.plain_every_percent = 0;
  EXPECT_THROW(Progress(10, "x", bad), ValueError);
  Progress bar(10, "x", fake(out, ProgressMode::Plain, &now));
  EXPECT_THROW(bar.update(11), ValueError);
  EXPECT_THROW(bar.update(-1), ValueError);
}

}  // namespace
}  // namespace tiny
