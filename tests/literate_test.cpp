// The rules of tests/literate.h, tried on small READMEs written here: each rule accepts an honest
// text and rejects the same text with one claim made false, naming the README line.
#include "literate.h"

using namespace tiny::testing;

namespace {

// A chapter's source with one region, and its golden output with one section that prints a
// blank line in its middle.
const std::vector<std::string> kSource = {
    "int main() {",     "  //! [sum]",  "  // Adds up the steps.",   "  double w = 1;",
    "",                 "  w += 1e-4;", "  std::printf(\"%g\\n\", w);", "  //! [sum]",
    "}",
};
const std::vector<std::string> kGolden = {
    "== sums ==", "a table", "", "in float32 = 2.0002", "in bfloat16 = 1.0000", "",
    "== later ==", "done",
};

// The README's verdict on `text`, given as lines.
::testing::AssertionResult check(const std::vector<std::string>& text) {
  return readme_is_honest(text, kSource, kGolden, TINY_SOURCE_DIR, "ch00_test");
}

// True when the check fails and its message contains `part`.
bool rejects(const std::vector<std::string>& text, const std::string& part) {
  const ::testing::AssertionResult r = check(text);
  if (r) return false;
  const std::string message = r.message();
  if (message.find(part) != std::string::npos) return true;
  ADD_FAILURE() << "rejected, but the message lacks \"" << part << "\":\n" << message;
  return false;
}

// A README with a line count, the snippet it counts, and a sentence that points at the output.
std::vector<std::string> readme(const std::string& count, const std::string& pointer,
                                const std::string& quoted_key = "sums") {
  return {"# Chapter 00",
          "",
          "## A sum in " + count,
          "",
          "<!-- snippet: sum -->",
          "```cpp",
          "// Adds up the steps.",
          "double w = 1;",
          "",
          "w += 1e-4;",
          "std::printf(\"%g\\n\", w);",
          "```",
          "",
          "<!-- output lines: " + quoted_key + " -->",
          "```text",
          "in float32 = 2.0002",
          "in bfloat16 = 1.0000",
          "```",
          "",
          pointer,
          "",
          "## Next",
          "",
          "No claims here."};
}

}  // namespace

TEST(Literate, AnHonestReadmePasses) {
  EXPECT_TRUE(check(readme("5 lines", "The sum is in the output above: 2.0002 in float32.")));
  EXPECT_TRUE(check(readme("3 lines of code", "As printed above, bfloat16 stays at 1.0000.")));
  EXPECT_TRUE(check(readme("a 5-line loop", "The lines above quote `in bfloat16`.")));
}

TEST(Literate, ALineCountMustMatchTheNextBlock) {
  // 5 lines are shown; 3 of them are code (a comment line and a blank one are not).
  EXPECT_TRUE(rejects(readme("55 lines", "The output above says 2.0002."),
                      "README line 3: \"55 lines\", but the next block (snippet 'sum', README "
                      "line 5) shows 5 lines, 3 of them code"));
  EXPECT_TRUE(rejects(readme("5 lines of code", "The output above says 2.0002."),
                      "\"5 lines of code\""));
  // A count with no block after it in its section refers to nothing the test can count.
  auto text = readme("5 lines", "The output above says 2.0002.");
  text.push_back("The next section is 12 lines long.");
  EXPECT_TRUE(rejects(text, "README line 25: \"12 lines\", but no snippet or output block follows"));
  // A count in words is prose, not a claim the test checks.
  EXPECT_TRUE(check(readme("four lines", "The output above says 2.0002.")));
}

TEST(Literate, ASentenceMustPrintWhatItPointsAt) {
  // The chapter 05 case: the sentence names a number that its block stops short of.
  auto text = readme("5 lines", "The result is in the output above: 2.0002 in float32.");
  text.erase(text.begin() + 15);  // the block quotes only its second line
  EXPECT_TRUE(rejects(text, "README line 19 says 2.0002, which the output block it points at"));
  // A number is matched as written: 2.00 is not 2.0002, and the 32 of float32 is not a number.
  EXPECT_TRUE(rejects(readme("5 lines", "The output above says 2.00 in float32."), "says 2.00,"));
  EXPECT_TRUE(check(readme("5 lines", "The output above compares float32 with bfloat16.")));
  EXPECT_TRUE(rejects(readme("5 lines", "The lines above quote `in float16`."),
                      "quotes `in float16`, which the output block"));
  // A sentence may wrap: its number on the next line still counts.
  text = readme("5 lines", "The result is in the output");
  text.insert(text.begin() + 20, "above, where it is 2.5.");
  EXPECT_TRUE(rejects(text, "README line 20 says 2.5,"));
}

TEST(Literate, ASentenceMustHaveTheOutputItPointsAtInItsSection) {
  // "below" with no output block after it before the next heading.
  EXPECT_TRUE(rejects(readme("5 lines", "The numbers below come from a real run."),
                      "README line 20: \"numbers below\", but there is no output block below it "
                      "in this section"));
  // "above" in a section whose output block is in the section before.
  auto text = readme("5 lines", "Nothing points here.");
  text.push_back("As printed above, it is 2.0002.");
  EXPECT_TRUE(rejects(text, "README line 25: \"printed above\", but there is no output block "
                            "above it in this section"));
  // A snippet is not output.
  text = readme("5 lines", "Nothing points here.");
  text.insert(text.begin() + 3, "The output below is the sum's.");
  EXPECT_TRUE(check(text)) << "the output lines block below it counts";
  text.insert(text.begin() + 3, "The output below is 9.");
  EXPECT_TRUE(rejects(text, "README line 4 says 9,"));
}

TEST(Literate, QuotedOutputLinesMustBeConsecutiveLinesOfTheSection) {
  // Lines of the section after its blank line, found wherever they start; not across a heading.
  EXPECT_TRUE(check(readme("5 lines", "Nothing points here.")));
  auto text = readme("5 lines", "Nothing points here.");
  text[16] = "a table";  // the two lines exist, but not one after the other
  EXPECT_TRUE(rejects(text, "README line 16 (output lines 'sums'): the block is not a run"));
  EXPECT_TRUE(rejects(readme("5 lines", "Nothing points here.", "later"), "not a run"));
}

TEST(Literate, NumbersAreReadAsWritten) {
  EXPECT_EQ(numbers_in("1 + 10,000 steps of 0.0001 in float32 = 2.0002; 1e-08 in E4M3 (x2)"),
            (std::vector<std::string>{"1", "10,000", "0.0001", "2.0002", "1e-08"}));
  EXPECT_EQ(numbers_in("a 16-bit product at 4.27x float32's time, 0.9-1.0 of it"),
            (std::vector<std::string>{"4.27", "0.9", "1.0"}));
}
