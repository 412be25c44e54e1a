// fuzz_einops: einops patterns and axis sizes. rearrange, reduce and einsum get a fuzzed
// pattern and axis sizes on a small tensor of distinct values. A rearrange the library accepts
// must be a permutation of the elements, and undoing it (the pattern's sides swapped) must give
// the input back whenever the library accepts that too. A reduce must keep the total ("sum"),
// the largest element ("max") or the average ("mean"), since every output element reduces a
// group of the same size. einsum is checked for crashes and stray exceptions only.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "fuzz_util.h"
#include "tiny/einops.h"

namespace {

std::vector<double> sorted(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v;
}

double total(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  FuzzedDataProvider in(bytes, size);
  tiny::Shape shape(in.ConsumeIntegralInRange<int>(0, 4));
  for (int64_t& d : shape) d = in.ConsumeIntegralInRange<int64_t>(0, 4);
  const int64_t n = tiny::shape_numel(shape);
  const tiny::Tensor x = tiny::arange(1, n + 1, 1, tiny::kFloat32).reshape(shape);
  const std::vector<double> xs = x.tolist();

  tiny::AxisSizes sizes;
  for (int k = in.ConsumeIntegralInRange<int>(0, 3); k > 0; --k) {
    std::string name = in.ConsumeRandomLengthString(4);
    sizes[name] = fuzz::argument(in);
  }
  const int what = in.ConsumeIntegralInRange<int>(0, 4);
  const std::string pattern = in.ConsumeRandomLengthString(64);

  if (what == 0) {
    tiny::Tensor y;
    if (!fuzz::accepted([&] { y = tiny::rearrange(x, pattern, sizes); })) return 0;
    fuzz::require(sorted(y.tolist()) == sorted(xs),
                  "rearrange '" + pattern + "' is not a permutation of the input");
    const size_t arrow = pattern.find("->");
    if (arrow == std::string::npos) return 0;
    const std::string back = pattern.substr(arrow + 2) + "->" + pattern.substr(0, arrow);
    tiny::Tensor z;
    if (!fuzz::accepted([&] { z = tiny::rearrange(y, back, sizes); })) return 0;
    fuzz::require(z.shape() == x.shape() && z.tolist() == xs,
                  "rearrange '" + back + "' does not undo '" + pattern + "'");
  } else if (what <= 3) {
    static const char* kReductions[] = {"sum", "max", "mean"};
    const std::string reduction = kReductions[what - 1];
    tiny::Tensor y;
    if (!fuzz::accepted([&] { y = tiny::reduce(x, pattern, reduction, sizes); })) return 0;
    const std::vector<double> ys = y.tolist();
    if (ys.empty() || xs.empty()) return 0;
    fuzz::require(xs.size() % ys.size() == 0,
                  "reduce '" + pattern + "' gives a count that does not divide the input's");
    const std::string where = "reduce '" + pattern + "', " + reduction;
    if (reduction == "sum") fuzz::require(total(ys) == total(xs), where + ": the total changed");
    if (reduction == "max")
      fuzz::require(*std::max_element(ys.begin(), ys.end()) == xs.back(),
                    where + ": the largest element changed");
    if (reduction == "mean") {
      const double a = total(ys) / double(ys.size()), b = total(xs) / double(xs.size());
      fuzz::require(std::fabs(a - b) <= 1e-4 * b, where + ": the average changed");
    }
  } else {
    fuzz::accepted([&] { tiny::einsum(x, x, pattern); });
    fuzz::accepted([&] { tiny::einsum(x, pattern); });
  }
  return 0;
}
