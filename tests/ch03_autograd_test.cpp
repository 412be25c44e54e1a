// Chapter 03's program, run for real: its golden output, its README, the lines seed document 000
// prints for check_autograd.py (compared with PyTorch's own gradients, which the chapter compiles
// in) and graph.py, and the bounds its measured gaps must respect.
#include <cstdlib>

#include "literate.h"

using namespace tiny::testing;

TINY_GOLDEN_TEST(Ch03_Autograd)
TINY_LITERATE_TEST(Ch03_Autograd)

TEST(Ch03_Autograd, PrintsTheDocumentsLines) {
  for (const char* line : {
           "loss: ours 0.4932, PyTorch 0.4932",
           "dL/dW1: [-0.2726, 0.0, 0.0, 0.0]   largest gap to PyTorch 0.0e+00",
           "dL/db1: [-0.2726, 0.0]   largest gap to PyTorch 0.0e+00",
           "dL/dw2: [-0.1947, 0.0]   largest gap to PyTorch 0.0e+00",
           "dL/db2: [-0.3894]   largest gap to PyTorch 0.0e+00",
           "layer applied 1x: 3 nodes in the graph",
           "layer applied 3x: 7 nodes in the graph",
           "under no_grad: grad_fn = None",
       })
    EXPECT_TRUE(chapter_prints(line)) << line;
  // The walk of graph.py, indentation included.
  EXPECT_NE(chapter_output().out.find("MmBackward0\n  ReluBackward0\n    MmBackward0\n      "
                                      "AccumulateGrad\n  AccumulateGrad\n"),
            std::string::npos);
  // Seed document 003: gradients_basics and gradients_flops (B, D, K = 1024, 256, 64).
  EXPECT_TRUE(
      chapter_prints("loss = 0.5 (x.w - 5)^2 with x = [1, 2, 3]: w.grad = tensor([1., 2., 3.])"));
  EXPECT_TRUE(
      chapter_prints("matmuls: forward 167772160 = 2BDD + 2BDK, backward 335544320 = 2 x forward"));
  EXPECT_TRUE(chapter_prints("together 503316480 = 6 x 1024 data points x 81920 parameters"));
}

// The gaps the chapter measures: both tapes agree with PyTorch to rounding (the document: 1e-16;
// a few float64 ulps), and central differences with h = 1e-6 agree to their own error, about
// h^2 + eps / h ~ 1e-10.
TEST(Ch03_Autograd, MeasuredGapsAreSmall) {
  double tapes = -1, library = -1, fd = -1;
  for (const auto& line : split_lines(chapter_output().out)) {
    if (line.rfind("200 random cases", 0) == 0)
      tapes = std::atof(line.substr(line.rfind(' ') + 1).c_str());
    if (line.rfind("the library's autograd, same networks", 0) == 0)
      library = std::atof(line.substr(line.rfind(' ') + 1).c_str());
    if (line.rfind("finite differences", 0) == 0)
      fd = std::atof(line.substr(line.rfind(' ') + 1).c_str());
  }
  EXPECT_GE(tapes, 0);
  EXPECT_LE(tapes, 1e-15);
  EXPECT_GE(library, 0);
  EXPECT_LE(library, 1e-15);
  EXPECT_GE(fd, 0);
  EXPECT_LE(fd, 1e-7);
}
