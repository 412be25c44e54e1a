// literate.h: keeps a chapter's README honest.
//
// The blocks. In chapters/<chapter>/README.md:
//   <!-- snippet: NAME -->       the fenced block that follows must equal the region of the
//                                chapter's source between the two `//! [NAME]` lines (dedented);
//   <!-- output: KEY -->         the fenced block that follows must match the section of the
//                                golden output whose heading line ("== ... ==") contains KEY,
//                                from the heading to the first blank line, line by line
//                                ({{regex}} parts of the golden file match the machine's numbers);
//   <!-- output lines: KEY -->   the fenced block that follows must be a run of consecutive lines
//                                of that section read up to the next heading, blank lines and
//                                all: the way to quote lines printed after a blank line;
//   ![caption](path)             the image must exist.
//
// The prose's claims about the blocks. A section of the README runs from a `#` or `##` heading
// to the next one (a `###` heading stays inside its section).
//   - A line count written in digits ("a tape in 61 lines", "a 12-line loop") is about the next
//     block, snippet or output, in its section; a count in a heading is about the first block of
//     the section it opens. "N lines" counts every line the block shows, blank lines and comments
//     too; "N lines of code" leaves out the blank lines and those holding only a `//` comment. A
//     count in words ("four lines") is not checked: write the digits to have it checked.
//   - A sentence points at output when "output", "line(s)", "number(s)", "table", "row(s)",
//     "printed", "prints" or "does" comes right before "above" or "below" ("in the output above",
//     "the numbers below", "as it does above"). It points at the nearest output block in that
//     direction within its section: there must be one, and each number the sentence writes and
//     each `backquoted` text it quotes must appear in that block (a number as one of the block's
//     numbers, written the same way: 2.0002 is not 2.00; the 32 of float32 and the 16 of
//     "16-bit" are parts of names, not numbers).
// A failure names the README line. scripts/literate.py refreshes the blocks from the source and
// from a real run, never the prose, and then runs this check.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
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

// The golden section whose heading contains `key`: from the heading to the next blank line, or,
// with `to_next_heading`, to the next heading, blank lines included.
inline std::vector<std::string> output_section(const std::vector<std::string>& golden,
                                               const std::string& key,
                                               bool to_next_heading = false) {
  std::vector<std::string> section;
  bool in = false;
  for (const auto& line : golden) {
    const bool heading = line.rfind("== ", 0) == 0;
    if (!in && heading && line.find(key) != std::string::npos) in = true;
    else if (in && (to_next_heading ? heading : line.empty())) break;
    if (in) section.push_back(line);
  }
  while (to_next_heading && !section.empty() && section.back().empty()) section.pop_back();
  return section;
}

// A README line against the golden line it quotes: equal, or matching its {{regex}} parts.
inline bool golden_line_matches(const std::string& golden, const std::string& line) {
  return golden.find("{{") == std::string::npos ? golden == line
                                                : std::regex_match(line, golden_line_regex(golden));
}

// A fenced block of the README under a marker: its kind, its name or key, where it is (indices
// of the marker line and of the closing fence) and the lines between the fences.
struct ReadmeBlock {
  std::string kind;  // "snippet", "output" or "output lines"
  std::string key;
  size_t marker = 0, close = 0;
  std::vector<std::string> lines;
};

// The numbers a text writes, with thousands commas, a fraction and an exponent kept as written
// ("70,000", "2.0002", "1e-08"). Digits glued to a word are part of a name, not a number: the 32
// of float32, the 16 of a 16-bit product.
inline std::vector<std::string> numbers_in(const std::string& text) {
  static const std::regex number(R"(\d+(?:,\d{3})*(?:\.\d+)?(?:e[+-]?\d+)?)");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number);
       it != std::sregex_iterator(); ++it) {
    const size_t at = static_cast<size_t>(it->position());
    const size_t after = at + static_cast<size_t>(it->length());
    const char before = at > 0 ? text[at - 1] : ' ';
    const bool hyphenated = after + 1 < text.size() && text[after] == '-' &&
                            std::isalpha(static_cast<unsigned char>(text[after + 1]));
    if (!std::isalnum(static_cast<unsigned char>(before)) && before != '_' && before != '.' &&
        !hyphenated)
      found.push_back(it->str());
  }
  return found;
}

// The claims the prose makes about the blocks (the header's rules), checked against `blocks`.
inline ::testing::AssertionResult prose_is_honest(const std::vector<std::string>& readme,
                                                  const std::vector<ReadmeBlock>& blocks) {
  // Which section each line is in, and which lines are prose (outside the fences and markers),
  // gathered into paragraphs so that a sentence can wrap from one line to the next.
  std::vector<int> section(readme.size());
  std::vector<bool> prose(readme.size(), true);
  int current = 0;
  for (size_t i = 0; i < readme.size(); ++i) {
    if (readme[i].rfind("# ", 0) == 0 || readme[i].rfind("## ", 0) == 0) ++current;
    section[i] = current;
  }
  bool fenced = false;
  for (size_t i = 0; i < readme.size(); ++i) {
    const bool fence = readme[i].rfind("```", 0) == 0;
    if (fence || fenced || readme[i].rfind("<!--", 0) == 0) prose[i] = false;
    if (fence) fenced = !fenced;
  }
  struct Paragraph {
    std::string text;
    std::vector<std::pair<size_t, size_t>> starts;  // (offset in text, README line index)
    size_t line_at(size_t offset) const {
      size_t line = starts.front().second;
      for (const auto& [at, index] : starts)
        if (at <= offset) line = index;
      return line;
    }
  };
  std::vector<Paragraph> paragraphs;
  for (size_t i = 0; i < readme.size(); ++i) {
    const std::string& l = readme[i];
    if (!prose[i] || l.empty()) continue;
    // A paragraph ends at a blank line, a block or a heading; a list item or a table row is one.
    const bool starts_anew = i == 0 || !prose[i - 1] || readme[i - 1].empty() ||
                             readme[i - 1][0] == '#' || l[0] == '#' || l.rfind("- ", 0) == 0 ||
                             l[0] == '|';
    if (starts_anew) paragraphs.emplace_back();
    Paragraph& p = paragraphs.back();
    if (!p.text.empty()) p.text += ' ';
    p.starts.emplace_back(p.text.size(), i);
    p.text += l;
  }

  static const std::regex count(R"((\d+)[ -]lines?\b( of code)?)", std::regex::icase);
  static const std::regex pointer(
      R"(\b(output|outputs|lines?|numbers?|table|rows?|printed|prints|does) +(above|below)\b)",
      std::regex::icase);
  static const std::regex quoted("`([^`]+)`"), link(R"(\]\([^)]*\))");
  for (const Paragraph& p : paragraphs) {
    // Each line count against the next block of its section.
    for (auto it = std::sregex_iterator(p.text.begin(), p.text.end(), count);
         it != std::sregex_iterator(); ++it) {
      const size_t at = static_cast<size_t>(it->position());
      if (at > 0 && (std::isalnum(static_cast<unsigned char>(p.text[at - 1])) ||
                     p.text[at - 1] == '.' || p.text[at - 1] == ','))
        continue;  // the 1 of "1.5 lines" or of "x1 lines" is no count
      const size_t line = p.line_at(at);
      const ReadmeBlock* next = nullptr;
      for (const ReadmeBlock& b : blocks)
        if (b.marker > line && section[b.marker] == section[line]) {
          next = &b;
          break;
        }
      if (!next)
        return ::testing::AssertionFailure()
               << "README line " << line + 1 << ": \"" << it->str()
               << "\", but no snippet or output block follows in this section";
      size_t all = next->lines.size(), code = 0;
      for (const std::string& l : next->lines) {
        const size_t first = l.find_first_not_of(" \t");
        if (first != std::string::npos && l.compare(first, 2, "//") != 0) ++code;
      }
      const bool of_code = (*it)[2].matched;
      if (std::stoul((*it)[1].str()) != (of_code ? code : all))
        return ::testing::AssertionFailure()
               << "README line " << line + 1 << ": \"" << it->str() << "\", but the next block ("
               << next->kind << " '" << next->key << "', README line " << next->marker + 1
               << ") shows " << all << " lines, " << code
               << " of them code (not blank, not only a comment)";
    }
    // Each sentence that points at output against the output block it points at.
    for (auto it = std::sregex_iterator(p.text.begin(), p.text.end(), pointer);
         it != std::sregex_iterator(); ++it) {
      const size_t at = static_cast<size_t>(it->position());
      const size_t line = p.line_at(at);
      const bool above = std::tolower(static_cast<unsigned char>((*it)[2].str()[0])) == 'a';
      // The nearest output block in that direction, within the section.
      const ReadmeBlock* target = nullptr;
      for (const ReadmeBlock& b : blocks) {
        if (b.kind == "snippet" || section[b.marker] != section[line]) continue;
        if (above && b.close < line) target = &b;
        if (!above && b.marker > line && !target) target = &b;
      }
      if (!target)
        return ::testing::AssertionFailure()
               << "README line " << line + 1 << ": \"" << it->str() << "\", but there is no output "
               << "block " << (above ? "above it" : "below it") << " in this section";
      // The sentence: from the end of the previous one to the end of this one.
      size_t begin = 0, end = p.text.size();
      for (size_t k = 0; k + 1 < at; ++k)
        if (std::strchr(".!?", p.text[k]) && p.text[k + 1] == ' ') begin = k + 2;
      for (size_t k = at; k < p.text.size(); ++k)
        if (std::strchr(".!?", p.text[k]) && (k + 1 == p.text.size() || p.text[k + 1] == ' ')) {
          end = k + 1;
          break;
        }
      const std::string sentence = std::regex_replace(p.text.substr(begin, end - begin), link, "]");
      std::string block;
      for (const std::string& l : target->lines) block += l + "\n";
      const std::vector<std::string> printed = numbers_in(block);
      for (auto q = std::sregex_iterator(sentence.begin(), sentence.end(), quoted);
           q != std::sregex_iterator(); ++q)
        if (block.find((*q)[1].str()) == std::string::npos)
          return ::testing::AssertionFailure()
                 << "README line " << line + 1 << " quotes " << q->str() << ", which the output "
                 << "block it points at (README line " << target->marker + 1 << ") does not print";
      for (const std::string& n : numbers_in(std::regex_replace(sentence, quoted, " ")))
        if (std::find(printed.begin(), printed.end(), n) == printed.end())
          return ::testing::AssertionFailure()
                 << "README line " << line + 1 << " says " << n << ", which the output block it "
                 << "points at (\"" << it->str() << "\": README line " << target->marker + 1
                 << ") does not print";
    }
  }
  return ::testing::AssertionSuccess();
}

// The README's text against the chapter's source and golden output; images are looked up
// relative to `dir`.
inline ::testing::AssertionResult readme_is_honest(const std::vector<std::string>& readme,
                                                   const std::vector<std::string>& source,
                                                   const std::vector<std::string>& golden,
                                                   const std::string& dir,
                                                   const std::string& chapter) {
  if (readme.empty()) return ::testing::AssertionFailure() << "no " << dir << "/README.md";
  static const std::regex marker(R"(<!-- (snippet|output|output lines): (.+) -->)");
  static const std::regex image(R"(!\[[^\]]*\]\(([^)]+)\))");
  std::vector<ReadmeBlock> blocks;
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
    ReadmeBlock b{m[1], m[2], i, open + 1, {}};
    for (; b.close < readme.size() && readme[b.close].rfind("```", 0) != 0; ++b.close)
      b.lines.push_back(readme[b.close]);
    const bool snippet = b.kind == "snippet";
    const auto expected = snippet ? source_region(source, b.key)
                                  : output_section(golden, b.key, b.kind == "output lines");
    if (expected.empty())
      return ::testing::AssertionFailure()
             << "README line " << i + 1 << ": no output section '" << b.key << "'";
    if (b.kind == "output lines") {
      // A run of consecutive lines of the section, found wherever it starts.
      bool found = false;
      for (size_t start = 0; !found && start + b.lines.size() <= expected.size(); ++start) {
        found = !b.lines.empty();
        for (size_t k = 0; found && k < b.lines.size(); ++k)
          found = golden_line_matches(expected[start + k], b.lines[k]);
      }
      if (!found)
        return ::testing::AssertionFailure()
               << "README line " << open + 2 << " (output lines '" << b.key
               << "'): the block is not a run of consecutive lines of that output section";
    }
    for (size_t k = 0; b.kind != "output lines" && k < std::max(b.lines.size(), expected.size());
         ++k) {
      const std::string e = k < expected.size() ? expected[k] : "<end>";
      const std::string a = k < b.lines.size() ? b.lines[k] : "<end>";
      const bool ok = k < expected.size() && k < b.lines.size() &&
                      (snippet ? e == a : golden_line_matches(e, a));
      if (!ok)
        return ::testing::AssertionFailure()
               << "README line " << open + 2 + k << " (" << b.kind << " '" << b.key
               << "'):\n  expected: " << e << "\n  README:   " << a << "\n(scripts/literate.py "
               << chapter << " refreshes the blocks)";
    }
    i = b.close;
    blocks.push_back(std::move(b));
  }
  if (blocks.empty())
    return ::testing::AssertionFailure() << "the README has no snippet or output blocks";
  return prose_is_honest(readme, blocks);
}

inline ::testing::AssertionResult readme_is_honest(const std::string& chapter) {
  const std::string dir = std::string(TINY_SOURCE_DIR) + "/chapters/" + chapter;
  return readme_is_honest(split_lines(read_text(dir + "/README.md")),
                          split_lines(read_text(dir + "/" + chapter + ".cpp")),
                          split_lines(read_text(golden_path(chapter))), dir, chapter);
}

}  // namespace tiny::testing

// A chapter's README matches its source and its output.
#define TINY_LITERATE_TEST(Suite)                                      \
  TEST(Suite, ReadmeMatchesTheCodeAndTheOutput) {                      \
    EXPECT_TRUE(::tiny::testing::readme_is_honest(TINY_CHAPTER_NAME)); \
  }
