// progress.cpp: the progress line (progress.h). Everything that decides what the line says is
// the pure function format_progress(); the class only decides when to draw, and where.
#include "tiny/progress.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "tiny/error.h"

namespace tiny {

ProgressMode resolve_progress_mode(ProgressMode requested, bool is_terminal) {
  const char* env = std::getenv("TINY_PROGRESS");
  const std::string setting = env ? env : "";
  if (setting == "0" || setting == "off" || setting == "false") return ProgressMode::Off;
  if (requested != ProgressMode::Auto) return requested;
  if (setting == "plain") return ProgressMode::Plain;
  return is_terminal ? ProgressMode::Terminal : ProgressMode::Off;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  // Whole seconds, dropping the fraction as tqdm does; the cast is safe below ~292 billion years.
  const auto s = static_cast<int64_t>(std::min(seconds, 9.2e18));
  const int64_t h = s / 3600, m = s / 60 % 60, sec = s % 60;
  char buffer[48];
  if (h > 0)
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", static_cast<long long>(h),
                  static_cast<long long>(m), static_cast<long long>(sec));
  else
    std::snprintf(buffer, sizeof buffer, "%02lld:%02lld", static_cast<long long>(m),
                  static_cast<long long>(sec));
  return buffer;
}

std::string format_progress(const std::string& description, int64_t step, int64_t total,
                            std::optional<double> loss, double elapsed, int bar_width) {
  if (total <= 0)
    throw ValueError("format_progress: total must be positive, got " + std::to_string(total));
  if (step < 0 || step > total)
    throw ValueError("format_progress: step " + std::to_string(step) + " is outside [0, " +
                     std::to_string(total) + "]");
  if (bar_width < 0 || bar_width > 1000)
    throw ValueError("format_progress: bar_width must be in [0, 1000], got " +
                     std::to_string(bar_width));
  const double fraction = static_cast<double>(step) / static_cast<double>(total);
  std::string line = description.empty() ? "" : description + ": ";
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "%3.0f%%", fraction * 100.0);
  line += buffer;
  // Full cells only, rounded down (in integers, so 70% of 20 is 14, not 13.999...): the bar is
  // full exactly when the loop is done.
  const auto filled = static_cast<int64_t>(static_cast<__int128>(step) * bar_width / total);
  if (bar_width > 0) {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string.
    line += '|';
    line.append(static_cast<size_t>(filled), '#');
    line.append(static_cast<size_t>(bar_width - filled), ' ');
    line += "| ";
  } else line += ' ';  // no bar: the percentage and the count
  line += std::to_string(step) + "/" + std::to_string(total);
  const bool timed = std::isfinite(elapsed) && elapsed > 0 && step > 0;
  const double rate = timed ? static_cast<double>(step) / elapsed : 0.0;  // steps per second
  const double left = timed ? static_cast<double>(total - step) / rate : -1.0;
  line += " [" + format_duration(elapsed) + "<" + format_duration(left) + ", ";
  if (!timed) line += "?it/s";
  else if (rate >= 1.0) std::snprintf(buffer, sizeof buffer, "%.2fit/s", rate), line += buffer;
  else std::snprintf(buffer, sizeof buffer, "%.2fs/it", 1.0 / rate), line += buffer;
  if (loss) {
    std::snprintf(buffer, sizeof buffer, ", loss=%.4g", *loss);
    line += buffer;
  }
  return line + "]";
}

Progress::Progress(int64_t total, std::string description, ProgressOptions options)
    : total_(total), description_(std::move(description)), options_(std::move(options)) {
  if (total_ <= 0)
    throw ValueError("Progress: total must be positive, got " + std::to_string(total_));
  if (options_.plain_every_percent < 1 || options_.plain_every_percent > 100)
    throw ValueError("Progress: plain_every_percent must be in [1, 100], got " +
                     std::to_string(options_.plain_every_percent));
  if (!(options_.min_interval >= 0))
    throw ValueError("Progress: min_interval must be a non-negative number of seconds");
  if (options_.bar_width < 0 || options_.bar_width > 1000)
    throw ValueError("Progress: bar_width must be in [0, 1000], got " +
                     std::to_string(options_.bar_width));
  out_ = options_.stream ? options_.stream : &std::cerr;
  // Only the default stream is known to be the process's stderr, whose terminal we can ask.
  const bool terminal = options_.stream == nullptr && ::isatty(STDERR_FILENO) == 1;
  mode_ = resolve_progress_mode(options_.mode, terminal);
  start_ = now();
}

Progress::~Progress() {
  try {
    close();
  } catch (...) {  // a destructor must not throw; a failed final draw loses nothing
  }
}

double Progress::now() const {
  if (options_.clock) return options_.clock();
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void Progress::update(int64_t step, std::optional<double> loss) {
  if (step < 0 || step > total_)
    throw ValueError("Progress::update: step " + std::to_string(step) + " is outside [0, " +
                     std::to_string(total_) + "]");
  if (closed_) return;
  step_ = step;
  if (loss) loss_ = loss;
  switch (mode_) {
    case ProgressMode::Terminal: {
      const double t = now();
      // Drawing costs a system call and the terminal's time; ten times a second is smooth.
      if (last_draw_ < 0 || t - last_draw_ >= options_.min_interval || step == total_)
        draw_terminal(false);
      break;
    }
    case ProgressMode::Plain: {
      // The largest multiple of the interval reached so far; print when it grows.
      const int64_t every = options_.plain_every_percent;
      const int64_t reached = step * 100 / total_ / every * every;
      if (reached > printed_percent_) {
        printed_percent_ = reached;
        *out_ << format_progress(description_, step_, total_, loss_, now() - start_,
                                 options_.bar_width)
              << '\n';
        out_->flush();
      }
      break;
    }
    case ProgressMode::Auto:
    case ProgressMode::Off: break;
  }
}

void Progress::draw_terminal(bool final) {
  const double t = now();
  const std::string line =
      format_progress(description_, step_, total_, loss_, t - start_, options_.bar_width);
  // '\r' returns to the start of the line; spaces blank what a longer earlier line left.
  *out_ << '\r' << line;
  if (line.size() < last_length_) *out_ << std::string(last_length_ - line.size(), ' ');
  if (final) *out_ << '\n';
  out_->flush();
  last_length_ = line.size();
  last_draw_ = t;
}

void Progress::write(const std::string& text) {
  const bool redraw = mode_ == ProgressMode::Terminal && !closed_ && last_draw_ >= 0;
  if (redraw) {
    *out_ << '\r' << std::string(last_length_, ' ') << '\r';
    out_->flush();
  }
  std::fputs(text.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (redraw) draw_terminal(false);
}

void Progress::close() {
  if (closed_) return;
  closed_ = true;
  if (mode_ == ProgressMode::Terminal) draw_terminal(true);
}

}  // namespace tiny
