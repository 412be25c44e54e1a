// literate.h: keeps a chapter's README honest.
//
// In chapters/<chapter>/README.md:
//   <!-- snippet: NAME -->   the fenced block that follows must equal the region of the
//                            chapter's source between the two `//! [NAME]` lines (dedented);
//   <!-- output: KEY -->     the fenced block that follows must match the section of the golden
//                            output whose heading line ("== ... ==") contains KEY, line by line
//                            ({{regex}} parts of the golden file match the machine's numbers);
//   ![caption](path)         the image must exist.
// scripts/literate.py refreshes the blocks from the source and from a real run.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "golden.h"

namespace tiny::testing {

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The lines between the two `//! [name]` markers, with their common indentation removed.
inline std::vector<std::string> source_region(const std::vector<std::string>& source,
                                              const std::string& name) {
  std::vector<std::string> region;
  int markers = 0;
  for (const auto& line : source) {
    if (line.find("//! [" + name + "]") != std::string::npos) {
      ++markers;
      continue;
    }
    if (markers == 1) region.push_back(line);
  }
  if (markers != 2) return {"<no region '" + name + "' in the source>"};
  size_t indent = std::string::npos;
  for (const auto& l : region)
    if (l.find_first_not_of(' ') != std::string::npos)
      indent = std::min(indent, l.find_first_not_of(' '));
  for (auto& l : region) l = l.size() >= indent ? l.substr(indent) : "";
  return region;
}

// The golden section whose heading contains `key`: from the heading to the next blank line.
inline std::vector<std::string> output_section(const std::vector<std::string>& golden,
                                               const std::string& key) {
  std::vector<std::string> section;
  bool in = false;
  for (const auto& line : golden) {
    if (!in && line.rfind("== ", 0) == 0 && line.find(key) != std::string::npos) in = true;
    else if (in && line.empty()) break;
    if (in) section.push_back(line);
  }
  return section;
}

inline ::testing::AssertionResult readme_is_honest(const std::string& chapter) {
  const std::string dir = std::string(TINY_SOURCE_DIR) + "/chapters/" + chapter;
  const auto readme = split_lines(read_text(dir + "/README.md"));
  const auto source = split_lines(read_text(dir + "/" + chapter + ".cpp"));
  const auto golden = split_lines(read_text(golden_path(chapter)));
  if (readme.empty()) return ::testing::AssertionFailure() << "no " << dir << "/README.md";
  static const std::regex marker(R"(<!-- (snippet|output): (.+) -->)");
  static const std::regex image(R"(!\[[^\]]*\]\(([^)]+)\))");
  int checked = 0;
  for (size_t i = 0; i < readme.size(); ++i) {
    std::smatch m;
    for (auto it = std::sregex_iterator(readme[i].begin(), readme[i].end(), image);
         it != std::sregex_iterator(); ++it) {
      const std::string path = dir + "/" + (*it)[1].str();
      if (!std::filesystem::exists(path))
        return ::testing::AssertionFailure()
               << "README line " << i + 1 << ": missing image " << path;
    }
    if (!std::regex_match(readme[i], m, marker)) continue;
    // The fenced block right after the marker.
    size_t open = i + 1;
    if (open >= readme.size() || readme[open].rfind("```", 0) != 0)
      return ::testing::AssertionFailure()
             << "README line " << i + 1 << ": marker not followed by a ``` block";
    std::vector<std::string> block;
    size_t close = open + 1;
    for (; close < readme.size() && readme[close].rfind("```", 0) != 0; ++close)
      block.push_back(readme[close]);
    const bool snippet = m[1] == "snippet";
    const auto expected = snippet ? source_region(source, m[2]) : output_section(golden, m[2]);
    if (expected.empty())
      return ::testing::AssertionFailure()
             << "README line " << i + 1 << ": no output section '" << m[2] << "'";
    for (size_t k = 0; k < std::max(block.size(), expected.size()); ++k) {
      const std::string e = k < expected.size() ? expected[k] : "<end>";
      const std::string a = k < block.size() ? block[k] : "<end>";
      const bool ok = k < expected.size() && k < block.size() &&
                      (snippet || e.find("{{") == std::string::npos
                           ? e == a
                           : std::regex_match(a, golden_line_regex(e)));
      if (!ok)
        return ::testing::AssertionFailure()
               << "README line " << open + 2 + k << " (" << m[1] << " '" << m[2]
               << "'):\n  expected: " << e << "\n  README:   " << a << "\n(scripts/literate.py "
               << chapter << " refreshes the blocks)";
    }
    ++checked;
    i = close;
  }
  if (checked == 0)
    return ::testing::AssertionFailure() << "the README has no snippet or output blocks";
  return ::testing::AssertionSuccess();
}

}  // namespace tiny::testing

// A chapter's README matches its source and its output.
#define TINY_LITERATE_TEST(Suite)                                      \
  TEST(Suite, ReadmeMatchesTheCodeAndTheOutput) {                      \
    EXPECT_TRUE(::tiny::testing::readme_is_honest(TINY_CHAPTER_NAME)); \
  }
