/// @file timing.h
/// @brief Honest timing: warm up, repeat, take the median.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace tiny {

/// Median seconds per call of `fn` over `trials` runs, after one warm-up call. (The CUDA
/// chapter adds a device synchronisation before each clock reading.)
inline double timed(const std::function<void()>& fn, int trials = 10) {
  fn();  // warm up: first-touch page faults, caches, thread pools
  std::vector<double> seconds;
  seconds.reserve(trials);
  for (int i = 0; i < trials; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace tiny
