/// @file progress.h
/// @brief A progress line for long loops, the way tqdm draws one.
///
///     train:  42%|########            | 420/1000 [00:12<00:16, 34.50it/s, loss=0.1234]
///
/// A training loop that prints nothing for minutes looks hung; one that prints a line per step
/// buries its output. On a terminal the line is redrawn in place (a carriage return, no
/// newline), at most about ten times a second, however fast the loop runs.
///
/// Where the stream is not a terminal (a log file, a pipe, a test capturing the output) the
/// default is silence: the line holds timings, which differ from run to run, and the chapters'
/// golden outputs must not. `TINY_PROGRESS=plain` asks for a plain line at every 10% instead
/// (for logs of long runs), and `TINY_PROGRESS=0` turns every progress line off. Progress is
/// written to stderr, never to stdout, which holds a program's results.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

namespace tiny {

/// How a Progress shows itself.
enum class ProgressMode {
  Auto,  ///< Terminal when the stream is a terminal, else Off (TINY_PROGRESS may change it)
  Terminal,  ///< one line, redrawn in place with a carriage return, at most every `min_interval` seconds
  Plain,  ///< a full line (ending in '\n') each time another `plain_every_percent` is done
  Off,    ///< nothing
};

/// Settings of a Progress; the defaults are what a training loop wants.
struct ProgressOptions {
  ProgressMode mode = ProgressMode::Auto;  ///< see ProgressMode
  /// Where the line goes; null means std::cerr (whose terminal-ness Auto checks). Any other
  /// stream counts as "not a terminal" for Auto.
  std::ostream* stream = nullptr;
  double min_interval = 0.1;     ///< seconds between two redraws in Terminal mode
  int plain_every_percent = 10;  ///< how often Plain mode prints (1..100)
  int bar_width = 20;            ///< characters inside |...|
  /// Seconds on a monotonic clock; empty means std::chrono::steady_clock. Tests pass a fake.
  std::function<double()> clock;
};

/// The mode `requested` becomes in this process: TINY_PROGRESS=0 (or "off", "false") gives Off
/// whatever was asked; for Auto, TINY_PROGRESS=plain gives Plain, and otherwise Terminal when
/// `is_terminal`, else Off.
ProgressMode resolve_progress_mode(ProgressMode requested, bool is_terminal);

/// "00:12", "01:05:09": a duration as tqdm prints it (minutes:seconds, hours only when needed);
/// "?" for a negative or non-finite number.
std::string format_duration(double seconds);

/// The progress line for `step` of `total` steps after `elapsed` seconds, with `loss` as a
/// postfix when given (no a carriage return, no newline). Pure, so tests can check it digit for digit:
/// format_progress("train", 420, 1000, 0.1234, 12.0, 20) is
/// "train:  42%|########            | 420/1000 [00:12<00:16, 35.00it/s, loss=0.1234]".
/// A rate below one step per second is shown as seconds per step ("2.50s/it"); before any time
/// has passed the rate and the time left are "?".
std::string format_progress(const std::string& description, int64_t step, int64_t total,
                            std::optional<double> loss, double elapsed, int bar_width = 20);

/// A progress line for a loop of `total` steps:
///
///     Progress bar(num_steps, "train");
///     for (int64_t t = 0; t < num_steps; ++t) { ...; bar.update(t + 1, loss.item()); }
///
/// The destructor (or close()) draws the last state and ends the line.
class Progress {
 public:
  /// A line for `total` steps (positive; ValueError otherwise), labelled `description`.
  explicit Progress(int64_t total, std::string description = "", ProgressOptions options = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Records that `step` steps are done (0..total; ValueError outside), with the latest loss
  /// when given, and redraws if the mode says it is time.
  void update(int64_t step, std::optional<double> loss = std::nullopt);
  /// Prints `text` (a line, '\n' added) on stdout without tearing the bar, as tqdm.write does:
  /// on a terminal the bar is wiped first and redrawn under the text.
  void write(const std::string& text);
  /// Draws the final state and ends the line (Terminal mode); later calls do nothing.
  void close();
  /// The mode in effect (after resolve_progress_mode()).
  ProgressMode mode() const { return mode_; }

 private:
  double now() const;
  void draw_terminal(bool final);

  int64_t total_;
  std::string description_;
  ProgressOptions options_;
  ProgressMode mode_;
  std::ostream* out_;
  double start_ = 0;
  double last_draw_ = -1;   // when the terminal line was last drawn (-1: never)
  size_t last_length_ = 0;  // its length, so a shorter line can blank the rest
  int64_t step_ = 0;
  std::optional<double> loss_;
  int64_t printed_percent_ = 0;  // Plain mode: the last multiple of the interval printed
  bool closed_ = false;
};

}  // namespace tiny
