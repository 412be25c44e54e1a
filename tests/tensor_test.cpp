// Storage and Tensor: creation, metadata, element access, copies, conversions, the allocator's
// accounting, and the device model's answers on a machine without CUDA.
#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

TEST(Tensor, ZerosOfFourByEightIs128Bytes) {  // seed document 003
  Tensor x = zeros({4, 8});
  EXPECT_EQ(x.dtype(), kFloat32);
  EXPECT_EQ(x.shape(), (Shape{4, 8}));
  EXPECT_EQ(x.numel(), 32);
  EXPECT_EQ(x.element_size(), 4u);
  EXPECT_EQ(x.nbytes(), 128u);
  EXPECT_EQ(x.storage()->nbytes(), 128u);
  EXPECT_EQ(x.sum().item(), 0.0);
}

TEST(Tensor, CreationFromNestedListsInfersDtypes) {
  Tensor f = tensor({{1., 2, 3}, {4, 5, 6}});
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(f.shape(), (Shape{2, 3}));
  EXPECT_EQ(f.tolist(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tensor({1, 2}).dtype(), kInt64);
  EXPECT_EQ(tensor({true, false}).dtype(), kBool);
  EXPECT_EQ(tensor({1, 2}, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(tensor(2.5).dim(), 0);
  EXPECT_EQ(tensor({{1., 2}, {3, 4}}).at({1, 0}), 3.0);
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        tensor({{1, 2, 3}, {4, 5}});
      },
      "expected sequence of length 3 at dim 1 (got 2)"));
}

TEST(Tensor, FactoryFunctions) {
  EXPECT_EQ(ones({2, 3}).sum().item(), 6.0);
  EXPECT_EQ(full({2, 2}, 7).dtype(), kInt64);
  EXPECT_EQ(full({2, 2}, 1.5).tolist(), (std::vector<double>{1.5, 1.5, 1.5, 1.5}));
  EXPECT_EQ(arange(5).tolist(), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(12.0).dtype(), kFloat32);
  EXPECT_EQ(arange(1, 2, 0.25).tolist(), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(5, 0, -2).tolist(), (std::vector<double>{5, 3, 1}));
  EXPECT_TRUE(equal(eye(3), tensor({{1., 0, 0}, {0, 1, 0}, {0, 0, 1}})));
  EXPECT_EQ(eye(2, 3).shape(), (Shape{2, 3}));
  EXPECT_EQ(empty({0, 3}).numel(), 0);
  EXPECT_TRUE(throws_with<RuntimeError>([] { arange(0, 5, 0); }, "step must be nonzero"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { empty({2, -1}); }, "negative dimension -1"));
  EXPECT_EQ(from_vector<int32_t>({1, 2, 3, 4}, {2, 2}).dtype(), kInt32);
}

TEST(Tensor, ItemAndTolist) {
  EXPECT_EQ(tensor({3.5}).item(), 3.5);
  EXPECT_EQ(tensor({7}).item<int64_t>(), 7);
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({3}).item(); },
                                        "a Tensor with 3 elements cannot be converted to Scalar"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({0}).item(); },
                                        "a Tensor with 0 elements cannot be converted to Scalar"));
  EXPECT_TRUE(throws_with<IndexError>(
      [] {
        ones({2, 2}).at({2, 0});
      },
      "index 2 is out of bounds for dimension 0 with size 2"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({2}).data<double>(); },
                                     "expected scalar type Double but found Float"));
}

TEST(Tensor, ConversionsBetweenDtypes) {
  Tensor x = tensor({-1.5, 0.0, 2.7});
  EXPECT_EQ(x.to(kInt64).tolist(), (std::vector<double>{-1, 0, 2}));  // truncation, as C casts
  EXPECT_EQ(x.to(kBool).tolist(), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(x.to(kFloat32).data_ptr(), x.data_ptr());  // same dtype: the same tensor
  EXPECT_NE(x.to(kFloat64).data_ptr(), x.data_ptr());
  EXPECT_EQ(tensor({true, false}).to(kFloat32).tolist(), (std::vector<double>{1, 0}));
}

TEST(Tensor, CopyBroadcastsAndConverts) {
  Tensor dst = zeros({2, 3});
  dst.copy_(tensor({1, 2, 3}));
  EXPECT_EQ(dst.tolist(), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  dst.fill_(4.5);
  EXPECT_EQ(dst.sum().item(), 27.0);
  // Writing through a view changes the original.
  dst[1] = tensor({7., 8, 9});
  EXPECT_EQ(dst.tolist(), (std::vector<double>{4.5, 4.5, 4.5, 7, 8, 9}));
  dst.index({Slice{}, 0}) = -1;
  EXPECT_EQ(dst.at({0, 0}), -1.0);
  EXPECT_EQ(dst.at({1, 0}), -1.0);
  // PyTorch's broadcast message (torch.ones(2, 3).copy_(torch.ones(4))).
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { dst.copy_(ones({4})); },
      "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"));
}

TEST(Tensor, CopyFromAnOverlappingView) {
  // A source that covers some of the destination's memory in another arrangement is refused, as
  // PyTorch refuses it: the result would depend on the order the elements are visited.
  const char* partial =
      "unsupported operation: some elements of the input tensor and the written-to tensor refer "
      "to a single memory location. Please clone() the tensor before performing the operation.";
  Tensor x = arange(9.0).reshape({3, 3});
  EXPECT_TRUE(throws_with<RuntimeError>([&] { x.copy_(x.T()); }, partial));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { x.slice(0, 0, 2).copy_(x.slice(0, 1, 3)); }, partial));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { x.view({9}).slice(0, 1, 9).copy_(x.view({9}).slice(0, 0, 8)); }, partial));
  EXPECT_EQ(x.tolist(), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8}));  // untouched
  // The same elements in the same layout, and disjoint parts of one storage, are fine.
  x.copy_(x);
  x.slice(0, 0, 1).copy_(x.slice(0, 2, 3));
  EXPECT_EQ(x.tolist(), (std::vector<double>{6, 7, 8, 3, 4, 5, 6, 7, 8}));
  // Views that are not dense (every other column) PyTorch lets through, as too costly to
  // decide; the library copies such a source aside first, so every element is read before it
  // is overwritten (copied in place, column 1 would already hold column 0's value when it is read).
  Tensor y = arange(9.0).reshape({3, 3});
  y.slice(1, 1, 3).copy_(y.slice(1, 0, 2));
  EXPECT_EQ(y.tolist(), (std::vector<double>{0, 0, 1, 3, 3, 4, 6, 6, 7}));
}

TEST(Tensor, CloneIsIndependent) {
  Tensor x = arange(4.0);
  Tensor y = x.clone();
  y[0] = 10;
  EXPECT_EQ(x.at({0}), 0.0);
  EXPECT_FALSE(y.shares_storage_with(x));
}

TEST(Allocator, AccountsBytesAndReusesBlocks) {
  const int64_t before = memory_allocated();
  reset_peak_memory_stats();
  {
    Tensor a = empty({32, 32});  // 4096 bytes
    Tensor b = empty({32, 32});
    EXPECT_EQ(memory_allocated() - before, 2 * 32 * 32 * 4);
    Tensor c = empty({3});  // 12 bytes, accounted as 512 like PyTorch
    EXPECT_EQ(memory_allocated() - before, 2 * 4096 + 512);
  }
  EXPECT_EQ(memory_allocated(), before);
  EXPECT_GE(max_memory_allocated() - before, 2 * 4096 + 512);
  // The next allocation of the same size comes from the cache.
  const int64_t hits = memory_stats().cache_hits;
  { Tensor again = empty({32, 32}); }
  EXPECT_EQ(memory_stats().cache_hits, hits + 1);
  empty_cache();
  // Only live blocks stay reserved: each at most 1/8 larger than its accounted size.
  const MemoryStats s = memory_stats();
  EXPECT_LE(s.reserved, s.allocated * 9 / 8 + 4096);
}

TEST(Device, CpuOnlyMachineReportsWhy) {
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  if (!cuda::available()) {
    EXPECT_FALSE(cuda::unavailable_reason().empty());
    EXPECT_EQ(cuda::device_count(), 0);
    EXPECT_TRUE(throws_with<RuntimeError>([] { empty({2}, kFloat32, Device::cuda()); }, "cuda:0"));
    EXPECT_TRUE(throws_with<RuntimeError>([] { ones({2}).to(Device::cuda()); }, "CUDA"));
  } else {
    GTEST_SKIP() << "a CUDA device is present; the CPU-only answers are not what it gives";
  }
  EXPECT_TRUE(ones({2}).to(Device::cpu()).defined());
}

// Sizes whose bytes overflow int64 are refused before any memory is asked for (they used to get
// a tiny block that the fill overran); the message is PyTorch's.
TEST(Tensor, FactoriesRefuseSizesWhoseBytesOverflow) {
  const int64_t huge = int64_t(1) << 62;
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { ones({huge}); },
      "Storage size calculation overflowed with sizes=[4611686018427387904]"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { zeros({huge}); },
      "Storage size calculation overflowed with sizes=[4611686018427387904]"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { empty({huge}, kInt64); },
      "Storage size calculation overflowed with sizes=[4611686018427387904]"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        ones({int64_t(1) << 40, int64_t(1) << 40});
      },
      "Storage size calculation overflowed with sizes=[1099511627776, 1099511627776]"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] {
        ones({int64_t(1) << 31, int64_t(1) << 31, 4});
      },
      "Storage size calculation overflowed with sizes=[2147483648, 2147483648, 4]"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        empty({huge, huge, 0});
      },
      "Storage size calculation overflowed with sizes=[4611686018427387904, "
      "4611686018427387904, 0]"));
  EXPECT_EQ(empty({0, huge, 4}).numel(), 0);  // PyTorch makes it too
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { arange(0, huge); },
      "Storage size calculation overflowed with sizes=[4611686018427387904]"));
}

// eye's sizes are checked as PyTorch checks them (-1 is the declaration's "m omitted").
TEST(Tensor, EyeRefusesNegativeSizes) {
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { eye(3, -2); }, "m must be greater or equal to 0, got -2"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { eye(-1); }, "n must be greater or equal to 0, got -1"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { eye(-2, 3); }, "n must be greater or equal to 0, got -2"));
  EXPECT_EQ(eye(3, 0).shape(), (Shape{3, 0}));
  EXPECT_EQ(eye(0).shape(), (Shape{0, 0}));
}

// arange with a bound that is not finite, a NaN step, or more elements than int64 counts:
// PyTorch's checks, in its order (the count used to be an undefined float-to-int cast).
TEST(Tensor, ArangeRefusesRangesItCannotCount) {
  const double inf = INFINITY, nan = NAN;
  EXPECT_TRUE(throws_with<RuntimeError>([&] { arange(0, inf); }, "unsupported range: 0 -> inf"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { arange(0.5, inf); }, "unsupported range: 0.5 -> inf"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { arange(-inf, 0); }, "unsupported range: -inf -> 0"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { arange(nan, 5); }, "unsupported range: nan -> 5"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { arange(0, 5, nan); }, "step must be nonzero"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { arange(0.0, 1e19); }, "invalid size, possible overflow?"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { arange(0, 10, -inf); }, "upper bound and lower bound inconsistent with step sign"));
  EXPECT_EQ(arange(0.0, 10.0, inf).numel(), 0);
}

// A number that the tensor's type cannot hold, as PyTorch answers (values checked against 1.13;
// the 16-bit types' names are 2.x's, c10::Half where 1.13 said at::Half): full, fill_ and scalar_tensor refuse an integer past an int32's range and a finite float
// past a float type's largest (its infinities and NaN pass); torch.tensor() stores inf instead;
// bool takes any number; a float into an integer type is compared before it is truncated.
TEST(Tensor, NumbersATypeCannotHoldAreRefusedWherePyTorchRefusesThem) {
  const char* kInt = "value cannot be converted to type int without overflow";
  const char* kHalf = "value cannot be converted to type c10::Half without overflow";
  EXPECT_TRUE(throws_with<RuntimeError>([] { full({2}, int64_t(1) << 40, kInt32); }, kInt));
  EXPECT_TRUE(throws_with<RuntimeError>([] { zeros({2}, kInt32).fill_(int64_t(1) << 40); }, kInt));
  EXPECT_TRUE(throws_with<RuntimeError>([] { scalar_tensor(int64_t(1) << 40, kInt32); }, kInt));
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { tensor({int64_t(1) << 40}, kInt32); },
                                "value cannot be converted to type int32 without overflow"));
  EXPECT_EQ(full({1}, INT32_MIN, kInt32).item(), double(INT32_MIN));
  EXPECT_EQ(zeros({1}, kInt64).fill_(INT64_MIN).item<int64_t>(), INT64_MIN);
  // A float into an int32: 2147483647.4 truncates to the largest int32, but PyTorch compares the
  // value itself with the limits.
  for (double v : {2147483647.4, 2147483647.5, -2147483648.5})
    EXPECT_TRUE(throws_with<RuntimeError>([&] { full({1}, v, kInt32); }, kInt)) << v;
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { tensor({2147483647.5}, kInt32); },
                                "value cannot be converted to type int32 without overflow"));
  // Floats into narrower floats.
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { full({2}, 1e300); }, "value cannot be converted to type float without overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { scalar_tensor(1e300); }, "value cannot be converted to type float without overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { full({1}, 3.4028235e38); }, "value cannot be converted to type float without overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { full({1}, -65505.0, kFloat16); }, kHalf));
  EXPECT_TRUE(throws_with<RuntimeError>([] { full({1}, int64_t(1) << 40, kFloat16); }, kHalf));
  EXPECT_TRUE(throws_with<RuntimeError>([] { ones({1}, kFloat16).fill_(-1e9); }, kHalf));
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { full({1}, 1e39, kBFloat16); },
                                "value cannot be converted to type c10::BFloat16 without overflow"));
  EXPECT_EQ(full({1}, 65504.0, kFloat16).item(), 65504.0);
  EXPECT_EQ(full({1}, INFINITY, kFloat16).item(), INFINITY);
  EXPECT_TRUE(std::isnan(full({1}, NAN, kFloat16).item()));
  EXPECT_EQ(full({1}, double(INT64_MAX)).item(), 0x1p63);  // an integer-valued double: no check
  EXPECT_EQ(full({1}, 1e300, kFloat64).item(), 1e300);
  // torch.tensor() does not check floats: 1e300 becomes inf, 2**40 in float16 too.
  EXPECT_EQ(tensor({1e300}).item(), INFINITY);
  EXPECT_EQ(tensor({int64_t(1) << 40}, kFloat16).item(), INFINITY);
  // bool takes any number.
  EXPECT_EQ(full({1}, 2.5, kBool).item(), 1.0);
  EXPECT_EQ(full({1}, int64_t(-1), kBool).item(), 1.0);
}

// A float number into a tensor: infinities and NaN stay themselves in a float dtype; into an
// integer dtype, a float the type cannot hold is PyTorch's error, not an undefined C++ cast.
TEST(Tensor, FloatNumbersIntoIntegerTensorsAreChecked) {
  const double inf = INFINITY, nan = NAN;
  EXPECT_EQ(full({2}, -inf).tolist(), (std::vector<double>{-inf, -inf}));
  EXPECT_TRUE(std::isnan(full({2}, nan).tolist()[1]));
  EXPECT_EQ(full({2}, 3.7, kInt64).tolist(), (std::vector<double>{3, 3}));
  EXPECT_EQ(full({2}, -3.7, kInt64).tolist(), (std::vector<double>{-3, -3}));
  EXPECT_EQ(full({2}, nan, kBool).tolist(), (std::vector<double>{1, 1}));
  for (double v : {nan, inf, -inf, 1e30})
    EXPECT_TRUE(
        throws_with<RuntimeError>([&] { full({2}, v, kInt64); },
                                  "value cannot be converted to type int64_t without overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { full({2}, 1e10, kInt32); },
                                        "value cannot be converted to type int without overflow"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { ones({2}, kInt64).fill_(nan); },
                                "value cannot be converted to type int64_t without overflow"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { scalar_tensor(nan, kInt64); },
                                "value cannot be converted to type int64_t without overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { tensor({nan}, kInt64); }, "value cannot be converted to type int64 without overflow"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { tensor({nan}, kInt32); }, "value cannot be converted to type int32 without overflow"));
  EXPECT_EQ(tensor({2.5}, kInt64).item(), 2.0);
  EXPECT_EQ(Scalar(nan).to_int(), INT64_MIN);
  EXPECT_EQ(Scalar(-2.9).to_int(), -2);
  EXPECT_TRUE(
      throws_with<RuntimeError>([] { scalar_tensor(NAN).item<int64_t>(); },
                                "value cannot be converted to type int64_t without overflow"));
  EXPECT_EQ(scalar_tensor(-7.5).item<int32_t>(), -7);
}

// A float tensor converted to an integer dtype: truncation, and NaN, infinities and values out
// of range give the type's minimum, as PyTorch gives on x86 (measured with PyTorch 1.13).
TEST(Tensor, FloatTensorsToIntegersAreDefinedForEveryValue) {
  const double inf = INFINITY, nan = NAN, lo64 = -9223372036854775808.0, lo32 = -2147483648.0;
  for (DType from : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Tensor x = tensor({nan, inf, -inf, 1e30, -1e30, 2.5, -2.5}, from);
    // float16 holds no 1e30: it is inf there, which gives the same answer.
    EXPECT_EQ(x.to(kInt64).tolist(), (std::vector<double>{lo64, lo64, lo64, lo64, lo64, 2, -2}))
        << dtype_name(from);
    EXPECT_EQ(x.to(kInt32).tolist(), (std::vector<double>{lo32, lo32, lo32, lo32, lo32, 2, -2}))
        << dtype_name(from);
  }
  EXPECT_EQ(tensor({3e9, 1e10}).to(kInt32).tolist(), (std::vector<double>{lo32, lo32}));
  EXPECT_EQ(tensor({-2147483648.0}, kFloat64).to(kInt32).item(), lo32);
  EXPECT_EQ(tensor({2147483647.0}, kFloat64).to(kInt32).item(), 2147483647.0);
}

// Element access on a huge tensor that owns little memory (an expanded one) reads in bounds.
TEST(Tensor, AtOnAHugeExpandedTensorReadsItsOneElement) {
  const Tensor x = full({1}, 5.0).expand({int64_t(1) << 62});
  EXPECT_EQ(x.at({1000}), 5.0);
  EXPECT_EQ(x.at({-1}), 5.0);
  EXPECT_TRUE(throws_with<IndexError>(
      [&] { x.at({int64_t(1) << 62}); },
      "index 4611686018427387904 is out of bounds for dimension 0 with size 4611686018427387904"));
}
