// Printing: Python's float repr and tuples, and tensors as PyTorch prints them (examples from
// tests/fixtures/pytorch_facts.txt, section 10, and torch 1.13's _tensor_str rules).
#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

TEST(Format, PythonFloatRepr) {
  const std::pair<double, const char*> cases[] = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {100.0, "100.0"},
      {0.1, "0.1"},
      {1e-08, "1e-08"},
      {0.0001, "0.0001"},
      {1e-05, "1e-05"},
      {1.5e-05, "1.5e-05"},
      {1e16, "1e+16"},
      {1234567890123456.0, "1234567890123456.0"},
      {40000000000.0, "40000000000.0"},
      {2.0001657009124756, "2.0001657009124756"},
      {1.7881393432617188e-07, "1.7881393432617188e-07"},
      {-2.5, "-2.5"},
      {INFINITY, "inf"},
      {-INFINITY, "-inf"},
      {NAN, "nan"},
      {1e300, "1e+300"},
      {123456.789, "123456.789"},
      {5e-324, "5e-324"}};
  for (const auto& [v, text] : cases) EXPECT_EQ(repr(v), text);
  EXPECT_EQ(format_list({0.0, 100.0, 8.0, 1.0}), "[0.0, 100.0, 8.0, 1.0]");
  EXPECT_EQ(format_tuple({3, 4}), "(3, 4)");
  EXPECT_EQ(format_tuple({1}), "(1,)");
  EXPECT_EQ(format_tuple({}), "()");
  EXPECT_EQ(with_commas(8393728), "8,393,728");
  EXPECT_EQ(with_commas(-1000), "-1,000");
  // The most negative int64 has no positive twin; its digits still come out whole.
  EXPECT_EQ(with_commas(std::numeric_limits<int64_t>::min()), "-9,223,372,036,854,775,808");
  EXPECT_EQ(with_commas(std::numeric_limits<int64_t>::max()), "9,223,372,036,854,775,807");
  EXPECT_EQ(with_commas(999), "999");
  EXPECT_EQ(strprintf("%5.2f|%s", 3.14159, "x"), " 3.14|x");
}

TEST(Format, TensorsAsPyTorchPrintsThem) {
  EXPECT_EQ(tensor({1., 2., 3.}).str(), "tensor([1., 2., 3.])");
  EXPECT_EQ(tensor({1, 2, 3}).str(), "tensor([1, 2, 3])");
  EXPECT_EQ(tensor(2.0).str(), "tensor(2.)");
  EXPECT_EQ(tensor({0.5, 1e-8}).str(), "tensor([5.0000e-01, 1.0000e-08])");
  EXPECT_EQ(tensor({1.5}, kBFloat16).str(), "tensor([1.5000], dtype=torch.bfloat16)");
  EXPECT_EQ(tensor({1.0 / 3}, kFloat64).str(), "tensor([0.3333], dtype=torch.float64)");
  EXPECT_EQ(arange(12.0).reshape({3, 4}).str(),
            "tensor([[ 0.,  1.,  2.,  3.],\n"
            "        [ 4.,  5.,  6.,  7.],\n"
            "        [ 8.,  9., 10., 11.]])");
  EXPECT_EQ(tensor({true, false}).str(), "tensor([ True, False])");
  EXPECT_EQ(tensor({-1.5, 2.25}).str(), "tensor([-1.5000,  2.2500])");
  EXPECT_EQ(tensor({1, 2}, kInt32).str(), "tensor([1, 2], dtype=torch.int32)");
  EXPECT_EQ(zeros({0}).str(), "tensor([])");
  EXPECT_EQ(zeros({2, 0}).str(), "tensor([], size=(2, 0))");
  EXPECT_EQ(tensor({0.0, INFINITY, NAN}).str(), "tensor([0., inf, nan])");
  EXPECT_EQ(zeros({2, 1, 2}).str(), "tensor([[[0., 0.]],\n\n        [[0., 0.]]])");
}

TEST(Format, LongTensorsAreSummarisedAndWrapped) {
  EXPECT_EQ(arange(2000).str(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  // Lines wrap at 80 characters, aligned under the first element.
  EXPECT_EQ(arange(30).str(),
            "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
            "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])");
  EXPECT_EQ(zeros({40, 40}).str().substr(0, 40), "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n");
}
