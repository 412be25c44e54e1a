// einops-style patterns: rearrange, reduce and einsum against the same computations written
// with permute, reshape, sums and float64 loops; the lecture's examples; malformed patterns.
#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

TEST(Einops, TheLecturesExamples) {  // seed documents 003 and 004, section 3.2.3
  Tensor x = ones({2, 3, 4}), y = ones({2, 3, 4});
  Tensor z = einsum(x, y, "batch seq1 hidden, batch seq2 hidden -> batch seq1 seq2");
  EXPECT_EQ(z.shape(), (Shape{2, 3, 3}));
  EXPECT_TRUE(equal(z, matmul(x, y.transpose(-2, -1))));
  EXPECT_TRUE(equal(reduce(x, "batch seq hidden -> batch hidden", "mean"), x.mean({1})));
  EXPECT_TRUE(equal(reduce(x, "... hidden -> ...", "mean"), x.mean({-1})));
  Tensor h = ones({2, 3, 8}), w = ones({4, 4});
  Tensor split = rearrange(h, "... (heads hidden1) -> ... heads hidden1", {{"heads", 2}});
  EXPECT_EQ(split.shape(), (Shape{2, 3, 2, 4}));
  Tensor mixed = einsum(split, w, "... hidden1, hidden1 hidden2 -> ... hidden2");
  EXPECT_EQ(mixed.shape(), (Shape{2, 3, 2, 4}));
  EXPECT_EQ(rearrange(mixed, "... heads hidden2 -> ... (heads hidden2)").shape(), (Shape{2, 3, 8}));
}

TEST(Einops, RearrangeIsPermuteAndReshape) {
  TINY_SEEDED(rng);
  Tensor x = random_layout(rng, random_values(rng, {2, 3, 4, 5}), kFloat32);
  EXPECT_TRUE(equal(rearrange(x, "b c h w -> b h w c"), x.permute({0, 2, 3, 1})));
  EXPECT_TRUE(equal(rearrange(x, "b c h w -> b (c h w)"), x.reshape({2, 60})));
  EXPECT_TRUE(
      equal(rearrange(x, "b c h w -> (b h) w c"), x.permute({0, 2, 3, 1}).reshape({8, 5, 3})));
  // Splitting then merging in the other order interleaves: (h1 h2) -> (h2 h1).
  Tensor v = arange(6);
  EXPECT_EQ(rearrange(v, "(a b) -> (b a)", {{"a", 2}}).tolist(),
            (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(rearrange(v, "(a b) -> a b", {{"b", 3}}).shape(), (Shape{2, 3}));
  EXPECT_EQ(rearrange(v, "n -> n 1").shape(), (Shape{6, 1}));
  // A pure permutation is a view.
  EXPECT_TRUE(rearrange(x, "b c h w -> w h c b").shares_storage_with(x));
}

TEST(Einops, ReduceMatchesTheLibrarysReductions) {
  TINY_SEEDED(rng);
  Tensor x = random_layout(rng, random_values(rng, {2, 3, 4}), kFloat64);
  EXPECT_TRUE(close(reduce(x, "a b c -> c", "sum"), x.sum({0, 1}), 1e-14, 1e-14));
  EXPECT_TRUE(close(reduce(x, "a b c -> c a", "mean"), x.mean({1}).T(), 1e-14, 1e-14));
  EXPECT_TRUE(equal(reduce(x, "a b c -> a", "max"), max(max(x, 2).values, 1).values));
  // Pooling: split a dimension and reduce one of the parts.
  Tensor y = arange(8.0);
  EXPECT_EQ(reduce(y, "(n pair) -> n", "max", {{"pair", 2}}).tolist(),
            (std::vector<double>{1, 3, 5, 7}));
}

TEST(Einops, EinsumMatchesFloat64Loops) {
  TINY_SEEDED(rng);
  const Tensor a = random_layout(rng, random_values(rng, {2, 3, 4}), kFloat64);
  const Tensor b = random_layout(rng, random_values(rng, {2, 5, 4}), kFloat64);
  const Tensor c = random_layout(rng, random_values(rng, {5, 6}), kFloat64);
  // out[b, i, k] = sum_h sum_j a[b, i, h] * b[b, j, h] * c[j, k]
  Tensor ref = zeros({2, 3, 6}, kFloat64);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t k = 0; k < 6; ++k) {
        double acc = 0;
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t j = 0; j < 5; ++j) acc += a.at({n, i, h}) * b.at({n, j, h}) * c.at({j, k});
        ref.index({n, i, k}) = acc;
      }
  EXPECT_TRUE(
      close(einsum({a, b, c}, "batch i h, batch j h, j k -> batch i k"), ref, 1e-12, 1e-12));
  // Outer products, traces of shape, transposes and sums of a single operand.
  EXPECT_EQ(einsum(tensor({1., 2}), tensor({3., 4, 5}), "i, j -> i j").tolist(),
            (std::vector<double>{3, 4, 5, 6, 8, 10}));
  EXPECT_TRUE(equal(einsum(a, "b i h -> h i b"), a.permute({2, 1, 0})));
  EXPECT_TRUE(close(einsum(a, "b i h -> b"), a.sum({1, 2}), 1e-14, 1e-14));
  EXPECT_TRUE(
      close(einsum(a, b, "b i h, b j h -> "), (matmul(a, b.transpose(1, 2))).sum(), 1e-12, 1e-12));
}

TEST(Einops, MalformedPatternsRaiseClearErrors) {
  Tensor x = ones({2, 3, 8});
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { rearrange(x, "a b c -> a b"); },
      "Identifiers only on one side of expression (should be on both): {'c'}"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { rearrange(x, "a b -> a b"); },
                                        "Wrong shape: expected 2 dims. Received 3-dim tensor."));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] {
        rearrange(x, "a b (h d) -> a b h d", {{"h", 3}});
      },
      "Shape mismatch, can't divide axis of length 8 in chunks of 3"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { rearrange(x, "a b (h d) -> a b h d"); },
                                        "Could not infer sizes for {'h', 'd'}"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { rearrange(x, "a b (c -> a b c"); },
                                        "Imbalanced parentheses in expression: \"a b (c \""));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { rearrange(x, "a b c) -> a b c"); },
                                        "Brackets are not balanced"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { rearrange(x, "a b c"); }, "Pattern must contain '->'"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { rearrange(x, "a a c -> a c"); }, "duplicate dimension"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { reduce(x, "a b c -> a b", "median"); },
      "Unknown reduction median. Expect one of ('min', 'max', 'sum', 'mean', 'prod', 'any', "
      "'all')."));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { reduce(x, "a b c -> a d", "sum"); },
                                "Unexpected identifiers on the right side of reduce sum: {'d'}"));
  // rearrange names every identifier found on one side only, from both sides.
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { rearrange(x, "a b c -> a b d"); },
      "Identifiers only on one side of expression (should be on both): {'c', 'd'}"));
  // einsum: einops' checks of the pattern, then torch.einsum's of the operands, with the
  // letters einops gave the axes (a, b, c, d, in order of first appearance).
  EXPECT_TRUE(throws_with<EinopsError>([&] { einsum(x, ones({4, 8}), "a b c, d c -> a b e"); },
                                       "Unknown axis e on right side of einsum"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { einsum(x, ones({4, 7}), "a b c, d c -> a b d"); },
      "einsum(): subscript c has size 7 for operand 1 which does not broadcast with previously "
      "seen size 8"));
  // "(...)" merges dimensions, which rearrange and reduce do on their right side; einsum does
  // not group axes at all (the fuzzer once found it reading an empty group).
  EXPECT_TRUE(throws_with<NotImplementedError>([&] { einsum(x, "... -> (...)"); },
                                               "Shape rearrangement is not yet supported"));
  EXPECT_TRUE(throws_with<NotImplementedError>([&] { einsum(ones({2}), "a (...) -> a"); },
                                               "Shape rearrangement is not yet supported"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { einsum(x, "a b c, d -> a"); },
                                        "fewer operands were provided than specified"));
  EXPECT_TRUE(throws_with<ValueError>([&] { einsum(x, "a b c"); },
                                      "Einsum pattern must contain '->'."));
  EXPECT_TRUE(equal(x, ones({2, 3, 8})));
}

// The reductions besides sum, mean and max, against loops: min (integers too, where the order
// reversal must not overflow at the type's minimum), prod, and any/all, which give bool.
TEST(Einops, MinProdAnyAll) {
  const Tensor i = tensor({{INT32_MIN, 5, -7}, {3, INT32_MAX, 0}}, kInt32);
  EXPECT_EQ(reduce(i, "a b -> a", "min").tolist(), (std::vector<double>{INT32_MIN, 0}));
  EXPECT_EQ(reduce(i, "a b -> b", "max").tolist(), (std::vector<double>{3, INT32_MAX, 0}));
  EXPECT_EQ(reduce(i, "a b -> a", "min").dtype(), kInt32);
  const Tensor f = tensor({{1.5, -2.0, 4.0}, {0.5, 3.0, -1.0}});
  EXPECT_EQ(reduce(f, "a b -> b", "min").tolist(), (std::vector<double>{0.5, -2.0, -1.0}));
  EXPECT_EQ(reduce(f, "a b -> a", "prod").tolist(), (std::vector<double>{-12.0, -1.5}));
  EXPECT_EQ(reduce(tensor({{2, 3}, {4, 5}}), "a b -> ", "prod").item(), 120);
  EXPECT_EQ(reduce(tensor({{2, 3}, {4, 5}}), "a b -> ", "prod").dtype(), kInt64);
  const Tensor flags = tensor({{true, false}, {false, false}});
  EXPECT_EQ(reduce(flags, "a b -> a", "any").tolist(), (std::vector<double>{1, 0}));
  EXPECT_EQ(reduce(flags, "a b -> b", "all").tolist(), (std::vector<double>{0, 0}));
  EXPECT_EQ(reduce(f, "a b -> a", "all").dtype(), kBool);
  EXPECT_EQ(reduce(flags, "a b -> a", "min").dtype(), kBool);
  // The ellipsis merged on the right.
  EXPECT_EQ(rearrange(ones({2, 3, 4}), "b ... -> b (...)").shape(), (Shape{2, 12}));
  // An empty axis: any is false and all is true (torch.any and torch.all), where min and max
  // have nothing to give and raise amin's and amax's errors, naming the dimension as einops
  // counts it, with the reduced axes moved after the kept ones (einops 0.8.2 with torch 2.15).
  EXPECT_EQ(reduce(zeros({0}), "a ->", "any").item(), 0.0);
  EXPECT_EQ(reduce(zeros({0}), "a ->", "all").item(), 1.0);
  EXPECT_EQ(reduce(zeros({2, 0}), "a b -> a", "any").tolist(), (std::vector<double>{0, 0}));
  EXPECT_EQ(reduce(zeros({2, 0}), "a b -> a", "all").tolist(), (std::vector<double>{1, 1}));
  EXPECT_EQ(reduce(tensor({{0, 2}, {0, 0}}), "a b -> a", "any").tolist(), (std::vector<double>{1, 0}));
  EXPECT_EQ(reduce(zeros({2, 0}), "a b -> a", "all").dtype(), kBool);
  EXPECT_TRUE(throws_with<IndexError>([] { reduce(zeros({2, 0}), "a b -> a", "min"); },
                                      "amin(): Expected reduction dim 1 to have non-zero size."));
  EXPECT_TRUE(throws_with<IndexError>([] { reduce(zeros({2, 0, 3}), "a b c -> a c", "max"); },
                                      "amax(): Expected reduction dim 2 to have non-zero size."));
  EXPECT_TRUE(throws_with<IndexError>([] { reduce(zeros({0, 2, 3}), "a b c -> c", "max"); },
                                      "amax(): Expected reduction dim 1 to have non-zero size."));
  EXPECT_TRUE(throws_with<IndexError>([] { reduce(zeros({2, 3, 0}), "a b c -> b", "min"); },
                                      "amin(): Expected reduction dim 2 to have non-zero size."));
  // Axis names in any script, as Python identifiers allow.
  EXPECT_EQ(rearrange(zeros({2, 3}), "α b -> b α").shape(), (Shape{3, 2}));
}

// Numbers in a pattern, read as einops reads them: 1 is a dimension of length 1 (and nothing
// inside parentheses), another number on reduce's left side an axis of that length.
TEST(Einops, NumbersAreAnonymousAxes) {
  TINY_SEEDED(rng);
  const Tensor x = random_values(rng, {6, 5}).to(kFloat64);
  const Tensor pooled = reduce(x, "(h 3) w -> h w", "max");
  ASSERT_EQ(pooled.shape(), (Shape{2, 5}));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t w = 0; w < 5; ++w) {
      double best = -INFINITY;
      for (int64_t k = 0; k < 3; ++k) best = std::max(best, x.index({3 * h + k, w}).item());
      EXPECT_EQ(pooled.index({h, w}).item(), best);
    }
  EXPECT_TRUE(equal(rearrange(x, "a b -> a (1 b)"), x));
  EXPECT_EQ(rearrange(x.view({6, 1, 5}), "a 01 b -> a b").shape(), (Shape{6, 5}));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { rearrange(x, "(h 3) w -> h w"); },
                                        "Non-unitary anonymous axes are not supported"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { reduce(x, "a b -> a 2", "sum"); },
                                        "right side of reduce sum: {2-axis}"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [&] { rearrange(x, "a b_ -> a b_"); },
      "Invalid axis identifier: b_\naxis name should should not start or end with underscore"));
  EXPECT_TRUE(
      throws_with<RuntimeError>([&] { rearrange(x, "a\tb -> a b"); }, "Unknown character '\t'"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { rearrange(x, "(a ... -> a"); },
                                        "Imbalanced parentheses in expression: \"(a \u2026 \""));
}

// The parser marks the ellipsis with one control character while it reads; that character typed
// in a pattern is refused as einops refuses it, not read as a second ellipsis (which an input
// side of einsum, where a name may repeat, once let through to an out-of-range read).
TEST(Einops, ATypedEllipsisMarkIsAnUnknownCharacter) {
  const Tensor x = ones({2, 2});
  for (const std::string pattern : {"... \x1f -> ...", "\x1f -> \x1f", "a\x1f -> a\x1f"}) {
    EXPECT_TRUE(throws_with<EinopsError>([&] { einsum(x, pattern); }, "Unknown character '\x1f'"))
        << pattern;
    EXPECT_TRUE(throws_with<EinopsError>([&] { rearrange(x, pattern); }, "Unknown character '\x1f'"))
        << pattern;
  }
}
