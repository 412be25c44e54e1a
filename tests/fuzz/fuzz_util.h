// fuzz_util.h: what the libFuzzer harnesses share. A harness calls the library with the bytes
// libFuzzer gives it; an exception derived from tiny::Error is a fine answer (the library said
// no, in its own words), while a crash, a sanitizer report, any other exception (std::bad_alloc
// from an absurd size, a std::out_of_range, ...) or a result that disagrees with the reference
// is a finding: fail() prints what was wrong and aborts, so libFuzzer saves the input.
#pragma once
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tiny/error.h"

namespace fuzz {

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::abort();
}

inline void require(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

/// Runs `f`; the library's own errors are an accepted outcome (returns false), success true.
template <typename F> bool accepted(F&& f) {
  try {
    f();
    return true;
  } catch (const tiny::Error&) {
    return false;
  }
}

/// An integer argument: mostly small (where the interesting boundaries are), sometimes one of
/// the extremes that overflow careless arithmetic, sometimes any 64-bit value.
inline int64_t argument(FuzzedDataProvider& in) {
  static constexpr int64_t kExtremes[] = {std::numeric_limits<int64_t>::max(),
                                          std::numeric_limits<int64_t>::min(),
                                          std::numeric_limits<int64_t>::max() / 2,
                                          int64_t(1) << 62,
                                          -(int64_t(1) << 62),
                                          int64_t(1) << 32,
                                          int64_t(1) << 31,
                                          -(int64_t(1) << 31)};
  const uint8_t kind = in.ConsumeIntegral<uint8_t>();
  if (kind < 200) return in.ConsumeIntegralInRange<int64_t>(-6, 6);
  if (kind < 240) return kExtremes[kind % (sizeof kExtremes / sizeof kExtremes[0])];
  return in.ConsumeIntegral<int64_t>();
}

/// The bytes written to a file of this process's own (the readers take a path).
inline std::string write_file(const uint8_t* data, size_t size, const char* suffix) {
  const std::string path =
      std::string("/tmp/tiny_fuzz_") + std::to_string(::getpid()) + suffix;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace fuzz
