// Chapter 02's program, run for real: its output against the golden file, and the seven lines
// seed document 000 prints for tensor_views.py, which must appear exactly and in order.
#include <gtest/gtest.h>

#include "literate.h"

using namespace tiny::testing;

TINY_GOLDEN_TEST(Ch02_Views)
TINY_LITERATE_TEST(Ch02_Views)

TEST(Ch02_Views, PrintsTheSevenLinesOfTheDocument) {
  // Copied from seed document 000's output of tensor_views.py.
  const std::vector<std::string> document = {
      "x: shape (3, 4), strides (4, 1), contiguous True",
      "x.T: shape (4, 3), strides (1, 4), contiguous False, same memory True",
      "x[1]: offset 4, strides (1,);  x[:, 1]: offset 1, strides (4,)",
      "after t[0, 1] = 100: x[1, 0] = 100.0",
      "t.contiguous(): strides (3, 1), same memory False",
      "t.view(12) fails: view size is not compatible with input tensor's size and stride (at "
      "least one dimension spans across two contiguous subspaces)",
      "t.reshape(12) works (it copies when it must): [0.0, 100.0, 8.0, 1.0]"};
  const auto lines = split_lines(chapter_output().out);
  ASSERT_GE(lines.size(), document.size() + 1);
  for (size_t i = 0; i < document.size(); ++i)
    EXPECT_EQ(lines[i + 1], document[i]) << "line " << i + 2;
}

// The lecture's facts (seed document 004, sections 3.2.2 and 3.3.2): element (1, 2) of a 4x4
// tensor sits at 1*4 + 2*1 = 6, and a batched matmul keeps the leading dimensions.
TEST(Ch02_Views, ReproducesTheLecturesFacts) {
  const auto& out = chapter_output().out;
  EXPECT_NE(out.find("element (1, 2) is at 1*4 + 2*1 = 6"), std::string::npos);
  EXPECT_NE(out.find("(4, 8, 16, 32) @ (32, 2) -> (4, 8, 16, 2)"), std::string::npos);
  EXPECT_NE(out.find("tensor([[1., 1., 1.],\n        [0., 1., 1.],\n        [0., 0., 1.]])"),
            std::string::npos);
}

// A chapter program refuses arguments it does not know, with a message and a non-zero status,
// and writes its figure's data with --csv.
TEST(Ch02_Views, CommandLine) {
  const ProgramOutput bad = run_program(std::string(TINY_CHAPTER_EXE) + " --bogus");
  EXPECT_NE(bad.status, 0) << bad.out;
  EXPECT_NE(bad.out.find("error: unknown argument '--bogus' (the only option is --csv DIR; "
                         "--help says more)"),
            std::string::npos);
  const ProgramOutput no_dir = run_program(std::string(TINY_CHAPTER_EXE) + " --csv");
  EXPECT_EQ(no_dir.status, 1) << no_dir.out;
  EXPECT_EQ(no_dir.out, "error: --csv needs a folder: --csv DIR\n");
  // --help runs nothing: it prints the usage, with the program's own name, and succeeds.
  const ProgramOutput help = run_program(std::string(TINY_CHAPTER_EXE) + " --help");
  EXPECT_EQ(help.status, 0) << help.out;
  EXPECT_EQ(help.out.rfind("usage: ch02_views [--csv DIR]\n", 0), 0u) << help.out;
  EXPECT_NE(help.out.find("chapters/ch02_views/README.md"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("=="), std::string::npos) << "the chapter ran: " << help.out;
  const std::string dir = std::string(TINY_BINARY_DIR) + "/test_csv_ch02";
  const ProgramOutput good = run_program(std::string(TINY_CHAPTER_EXE) + " --csv " + dir);
  ASSERT_EQ(good.status, 0) << good.out;
  const auto rows = split_lines(read_text(dir + "/ch02_views.csv"));
  ASSERT_EQ(rows.size(),
            1u + 12 + 12 + 4 + 3);  // header, then the cells x, x.T, x[1], x[:, 1] read
  EXPECT_EQ(rows[0], "view,shape,strides,offset,order,cell");
  EXPECT_EQ(rows.back(), "\"x[:, 1]\",\"(3,)\",\"(4,)\",1,2,9");
}
