// DimVector, the small vector that shapes and strides live in (common/include/tiny/dim_vector.h).
// Its reference is std::vector<int64_t>: the same random sequence of operations is applied to
// both, and after each one they must hold the same numbers. The sequences cross the six-element
// inline buffer in both directions and feed the vector its own elements, where a small vector's
// bugs hide.
#include "test_util.h"

#include <sstream>
#include <utility>

using namespace tiny;
using namespace tiny::testing;

namespace {

void expect_same(const DimVector& got, const std::vector<int64_t>& want, const std::string& op) {
  ASSERT_EQ(got.size(), want.size()) << "after " << op;
  ASSERT_EQ(std::vector<int64_t>(got), want) << "after " << op;
  ASSERT_GE(got.capacity(), got.size()) << "after " << op;
}

}  // namespace

TEST(DimVector, StaysInlineUpToSixAndGrowsOnTheHeapBeyond) {
  DimVector v;
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.capacity(), DimVector::kInline);
  const int64_t* inline_data = v.data();
  for (int64_t i = 0; i < 6; ++i) v.push_back(i);
  EXPECT_EQ(v.data(), inline_data) << "six numbers must not need the heap";
  v.push_back(6);
  EXPECT_NE(v.data(), inline_data);
  EXPECT_EQ(v, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));

  // Moving a heap vector hands over its block; moving an inline one copies the numbers. Either
  // way the source is left empty and usable.
  const int64_t* block = v.data();
  DimVector moved(std::move(v));
  EXPECT_EQ(moved.data(), block);
  EXPECT_TRUE(v.empty());  // NOLINT(bugprone-use-after-move): a moved-from DimVector is empty
  v.push_back(9);
  EXPECT_EQ(v, (std::vector<int64_t>{9}));
  DimVector small{1, 2};
  DimVector small_moved(std::move(small));
  EXPECT_EQ(small_moved, (DimVector{1, 2}));
  EXPECT_TRUE(small.empty());  // NOLINT(bugprone-use-after-move)
}

TEST(DimVector, ConvertsToAndFromStdVectorAndCompares) {
  const std::vector<int64_t> seven{1, 2, 3, 4, 5, 6, 7};
  DimVector v = seven;
  std::vector<int64_t> back = v;
  EXPECT_EQ(back, seven);
  EXPECT_TRUE(v == seven);
  EXPECT_TRUE((DimVector{1, 2}) < (DimVector{1, 3}));
  EXPECT_TRUE((DimVector{1, 2}) < (DimVector{1, 2, 0}));
  EXPECT_TRUE((DimVector{}) < (DimVector{0}));
  EXPECT_FALSE((DimVector{2}) < (DimVector{1, 9}));
  EXPECT_EQ((DimVector{3, 4}), (DimVector{3, 4}));
  EXPECT_NE((DimVector{3, 4}), (DimVector{3, 4, 1}));
  std::ostringstream os;
  os << DimVector{2, 3, 4} << ' ' << DimVector{};
  EXPECT_EQ(os.str(), "[2, 3, 4] []");
}

TEST(DimVector, MatchesStdVectorUnderRandomEdits) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 200; ++trial) {
    DimVector got;
    std::vector<int64_t> want;
    for (int step = 0; step < 60; ++step) {
      const int64_t value = uniform_int(rng, -100, 100);
      const size_t n = want.size();
      const auto at = static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(n)));
      std::string op;
      switch (uniform_int(rng, 0, 11)) {
        case 0:
          op = "push_back";
          got.push_back(value);
          want.push_back(value);
          break;
        case 1:
          op = "push_back of its own element";
          if (n == 0) continue;
          got.push_back(got[n - 1 - at % n]);
          want.push_back(want[n - 1 - at % n]);
          break;
        case 2:
          op = "pop_back";
          if (n == 0) continue;
          got.pop_back();
          want.pop_back();
          break;
        case 3: {
          op = "insert one";
          got.insert(got.begin() + static_cast<ptrdiff_t>(at), value);
          want.insert(want.begin() + static_cast<ptrdiff_t>(at), value);
          break;
        }
        case 4: {
          op = "insert several copies";
          const auto count = static_cast<size_t>(uniform_int(rng, 0, 5));
          got.insert(got.begin() + static_cast<ptrdiff_t>(at), count, value);
          want.insert(want.begin() + static_cast<ptrdiff_t>(at), count, value);
          break;
        }
        case 5: {
          // Inserting a range of its own elements: the gap opened for them moves them.
          op = "insert its own range";
          const auto from = static_cast<size_t>(uniform_int(rng, 0, static_cast<int64_t>(n)));
          const std::vector<int64_t> copy(want.begin() + static_cast<ptrdiff_t>(from), want.end());
          got.insert(got.begin() + static_cast<ptrdiff_t>(at),
                     got.begin() + static_cast<ptrdiff_t>(from), got.end());
          want.insert(want.begin() + static_cast<ptrdiff_t>(at), copy.begin(), copy.end());
          break;
        }
        case 6: {
          op = "erase a range";
          const auto to = static_cast<size_t>(
              uniform_int(rng, static_cast<int64_t>(at), static_cast<int64_t>(n)));
          got.erase(got.begin() + static_cast<ptrdiff_t>(at),
                    got.begin() + static_cast<ptrdiff_t>(to));
          want.erase(want.begin() + static_cast<ptrdiff_t>(at),
                     want.begin() + static_cast<ptrdiff_t>(to));
          break;
        }
        case 7: {
          op = "resize";
          const auto size = static_cast<size_t>(uniform_int(rng, 0, 12));
          got.resize(size, value);
          want.resize(size, value);
          break;
        }
        case 8: {
          // Assigning a tail of itself moves the numbers towards the front.
          op = "assign its own tail";
          const auto from = at;
          got.assign(got.begin() + static_cast<ptrdiff_t>(from), got.end());
          want = std::vector<int64_t>(want.begin() + static_cast<ptrdiff_t>(from), want.end());
          break;
        }
        case 9: {
          op = "copy, then copy-assign";
          DimVector copy(got);
          DimVector other{7, 7, 7, 7, 7, 7, 7, 7};
          other = copy;
          got = other;
          break;
        }
        case 10: {
          op = "move-assign and swap";
          DimVector other{1, 2, 3};
          other.swap(got);  // got = {1, 2, 3}, other = the numbers
          got = std::move(other);
          break;
        }
        default: {
          op = "assign copies";
          const auto count = static_cast<size_t>(uniform_int(rng, 0, 9));
          got.assign(count, value);
          want.assign(count, value);
          break;
        }
      }
      expect_same(got, want, op);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// The kernels' loops keep each dimension's steps, one per operand, in a SmallVector of arrays.
TEST(DimVector, SmallVectorOfArraysGrowsPastItsInlineElements) {
  using Step = std::array<int64_t, 3>;
  SmallVector<Step, 6> steps;
  std::vector<Step> want;
  for (int64_t d = 0; d < 9; ++d) {
    steps.push_back({d, 2 * d, 3 * d});
    want.push_back({d, 2 * d, 3 * d});
    steps.back()[2] += 1;
    want.back()[2] += 1;
  }
  EXPECT_EQ(std::vector<Step>(steps), want);
  EXPECT_EQ(steps[7][1], 14);
}
