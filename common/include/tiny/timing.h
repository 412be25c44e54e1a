/// @file timing.h
/// @brief Honest timing: warm up, wait for the device before every clock reading, repeat, take
/// the median.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tiny/device.h"
#include "tiny/error.h"

namespace tiny {

/// Median seconds per call of `fn` over `trials` runs, after one warm-up call, for work that
/// runs on `device`. A GPU call returns when its work is queued, not done, so for a CUDA device
/// the timer waits for the device (synchronize(device)) after the warm-up and after every call,
/// before it reads the clock; on the CPU the work is done when the call returns. ValueError for
/// fewer than one trial (a median of nothing).
inline double timed(const std::function<void()>& fn, Device device, int trials = 10) {
  if (trials < 1)
    throw ValueError("timed(): trials must be a positive number, got " + std::to_string(trials));
  auto wait = [&] { synchronize(device); };
  fn();  // warm up: first-touch page faults, caches, thread pools, cuBLAS's kernel choice
  wait();
  std::vector<double> seconds;
  seconds.reserve(trials);
  for (int i = 0; i < trials; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    wait();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

/// timed(fn, Device::cpu(), trials): work that runs on the CPU.
inline double timed(const std::function<void()>& fn, int trials = 10) {
  return timed(fn, Device::cpu(), trials);
}

/// For timings that must agree with what a chapter's text says of them (no matmul beats the
/// machine's peak; queued calls are not slower than waited ones), which on a quiet machine they
/// do. Other work on the machine during one measurement can make them disagree, so while
/// `contradicts()` is true this calls `measure()` again, at most `attempts` times, and returns
/// whether they agree in the end.
inline bool remeasure_while(const std::function<bool()>& contradicts,
                            const std::function<void()>& measure, int attempts = 2) {
  for (int i = 0; i < attempts && contradicts(); ++i) measure();
  return !contradicts();
}

/// What a chapter appends to a line whose timings still contradict its text after
/// remeasure_while(): nothing when `agree`, else " (<contradiction>: the machine was busy while
/// this was measured; run it again on a quiet machine)". A contradiction is then reported as
/// what it is, never printed as a finding.
inline std::string busy_note(bool agree, const std::string& contradiction) {
  if (agree) return "";
  return " (" + contradiction + ": the machine was busy while this was measured; run it again on "
         "a quiet machine)";
}

}  // namespace tiny
