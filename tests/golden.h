// golden.h: runs a chapter's executable (or reads the run ctest made of it) and compares its
// output with tests/golden/<name>.txt.
//
// A golden file holds the exact expected output. Where the machine decides part of a line (a
// timing, a throughput), that part is written as {{regex}}, and the rest of the line must still
// match exactly; no line is skipped.
#pragma once
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace tiny::testing {

struct ProgramOutput {
  std::string out;
  // The program's exit code; 128 + N when signal N ended it; -1 when it could not be run (or, in
  // ctest's run, ended otherwise: `how` then has CMake's words for it, "Segmentation fault").
  int status = -1;
  std::string how;
};

// A wait status (what pclose returns) as the exit code a shell would show.
inline int exit_code(int wait_status) {
  if (wait_status == -1) return -1;
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

// How a program ended, in words for a test's log: its own exit code, and the signal too where
// the code is a shell's 128 + N (popen runs the program under /bin/sh, which reports a signal so).
inline std::string how_it_ended(const ProgramOutput& r) {
  if (r.status == -1)
    return "did not exit normally: " + (r.how.empty() ? std::string("it could not be run") : r.how);
  std::string s = "exited with status " + std::to_string(r.status);
  if (r.status > 128 && r.status < 128 + NSIG)
    s += " (signal " + std::to_string(r.status - 128) + ": " + strsignal(r.status - 128) + ")";
  return s;
}

inline ProgramOutput run_program(const std::string& command) {
  ProgramOutput r;
  // stderr too, so that a failure's message (an exercise's "not implemented") shows in the diff.
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  r.status = exit_code(pclose(pipe));
  return r;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A golden line as a regex: literal text escaped, {{...}} parts taken as written.
inline std::regex golden_line_regex(const std::string& line) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  std::string pattern;
  size_t pos = 0;
  while (pos < line.size()) {
    const size_t open = line.find("{{", pos);
    const size_t stop = open == std::string::npos ? line.size() : open;
    pattern += std::regex_replace(line.substr(pos, stop - pos), special, R"(\$&)");
    if (open == std::string::npos) break;
    const size_t close = line.find("}}", open + 2);
    pattern += "(?:" + line.substr(open + 2, close - open - 2) + ")";
    pos = close + 2;
  }
  return std::regex(pattern);
}

inline ::testing::AssertionResult matches_golden(const std::string& output,
                                                 const std::string& golden_path) {
  std::ifstream file(golden_path);
  if (!file) return ::testing::AssertionFailure() << "cannot read " << golden_path;
  std::stringstream ss;
  ss << file.rdbuf();
  const auto expected = split_lines(ss.str());
  const auto actual = split_lines(output);
  const size_t n = std::max(expected.size(), actual.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string e = i < expected.size() ? expected[i] : "<end of golden file>";
    const std::string a = i < actual.size() ? actual[i] : "<end of output>";
    const bool ok =
        i < expected.size() && i < actual.size() &&
        (e.find("{{") == std::string::npos ? e == a : std::regex_match(a, golden_line_regex(e)));
    if (!ok)
      return ::testing::AssertionFailure()
             << golden_path << ", line " << (i + 1) << ":\n  expected: " << e
             << "\n  actual:   " << a << "\n(make golden CH=.. regenerates it, showing the diff)";
  }
  return ::testing::AssertionSuccess();
}

inline std::string golden_path(const std::string& chapter) {
  return std::string(TINY_SOURCE_DIR) + "/tests/golden/" + chapter + ".txt";
}

#ifdef TINY_CHAPTER_EXE
// The chapter's run that ctest made (the test chNN_topic.run, tests/run_chapter.cmake): its output
// and exit status, when both files are there and the run is not older than the executable.
inline bool read_chapter_run(ProgramOutput& r) {
#ifdef TINY_CHAPTER_OUTPUT
  namespace fs = std::filesystem;
  const fs::path text = std::string(TINY_CHAPTER_OUTPUT) + ".txt";
  const fs::path status = std::string(TINY_CHAPTER_OUTPUT) + ".status";
  std::error_code e1, e2;
  const auto ran = fs::last_write_time(status, e1);
  const auto built = fs::last_write_time(TINY_CHAPTER_EXE, e2);
  if (e1 || e2 || ran < built) return false;
  std::ifstream status_file(status), text_file(text, std::ios::binary);
  if (!(status_file >> r.status) || !text_file) return false;
  std::getline(status_file >> std::ws, r.how);  // present when the run did not exit normally
  std::stringstream ss;
  ss << text_file.rdbuf();
  r.out = ss.str();
  return true;
#else
  (void)r;
  return false;
#endif
}

// The output of this suite's chapter: the run ctest made once for all of the chapter's tests, or,
// when there is none or it predates the executable (the test program run by hand), a run of its
// own, once per process.
inline const ProgramOutput& chapter_output() {
  static const ProgramOutput r = [] {
    ProgramOutput out;
    if (!read_chapter_run(out)) out = run_program(TINY_CHAPTER_EXE);
    // A chapter that fails says why on its last line; put that in the test's log.
    if (out.status != 0)
      std::printf("the chapter %s; its output:\n%s\n", how_it_ended(out).c_str(), out.out.c_str());
    return out;
  }();
  return r;
}

// True when the chapter printed `line` as one whole line.
inline bool chapter_prints(const std::string& line) {
  for (const auto& l : split_lines(chapter_output().out))
    if (l == line) return true;
  return false;
}

// True when some whole line the chapter printed matches the regular expression `pattern`
// (for numbers that may vary in their last digits, checked against a bound instead).
inline bool chapter_prints_matching(const std::string& pattern) {
  const std::regex re(pattern);
  for (const auto& l : split_lines(chapter_output().out))
    if (std::regex_match(l, re)) return true;
  return false;
}

// How many lines PyTorch printed in tests/fixtures/<fixture> (the ones written there as
// "print <line>" by the script beside it) the chapter printed too, each one missing reported as a
// failure; -1 when the file is missing.
inline int prints_pytorchs_lines(const std::string& fixture) {
  std::ifstream in(std::string(TINY_SOURCE_DIR) + "/tests/fixtures/" + fixture);
  if (!in) {
    ADD_FAILURE() << "tests/fixtures/" << fixture << " is missing";
    return -1;
  }
  int found = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("print ", 0) != 0) continue;
    if (chapter_prints(line.substr(6))) ++found;
    else ADD_FAILURE() << "PyTorch prints, the chapter does not:\n" << line.substr(6);
  }
  return found;
}

// The test every chapter has: it runs, and its output matches tests/golden/<chapter>.txt.
#define TINY_GOLDEN_TEST(Suite)                                                                    \
  TEST(Suite, RunsAndMatchesGoldenOutput) {                                                        \
    ASSERT_EQ(::tiny::testing::chapter_output().status, 0);                                        \
    EXPECT_TRUE(::tiny::testing::matches_golden(::tiny::testing::chapter_output().out,             \
                                                ::tiny::testing::golden_path(TINY_CHAPTER_NAME))); \
  }
#endif

}  // namespace tiny::testing
