// The CPU thread pool (common/src/parallel.h) and the kernels split across it: set_num_threads
// and get_num_threads as PyTorch has them; parallel_for's chunks, inlining, nesting and
// exceptions; a forked child; and, for elementwise ops, copies, conversions and sums on fresh
// random inputs of many shapes, layouts, broadcasts and dtypes, the same bits on one thread as
// on two, with sums also checked against float64 loops.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "cpu/cpu.h"
#include "cpu/isa.h"
#include "internal.h"
#include "parallel.h"
#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

namespace {

// Restores the thread count a test changed.
struct ThreadsGuard {
  int saved = get_num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

// Puts back whether the vector math streams its large results (isa.h), which a test below sets
// both ways: each processor has its own default, and both must give the same bits everywhere.
struct VectorMathStreamingGuard {
  bool saved = detail::cpu::vector_math_streams();
  ~VectorMathStreamingGuard() { detail::cpu::set_vector_math_streams(saved); }
};

// fn() on one thread and on two: the two results must be the same bits (element_bytes also
// compares -0.0 and NaN payloads), and a layout, shape and dtype the same.
template <typename F> ::testing::AssertionResult same_on_1_and_2_threads(F&& fn) {
  ThreadsGuard guard;
  set_num_threads(1);
  const Tensor one = fn();
  set_num_threads(2);
  const Tensor two = fn();
  if (one.shape() != two.shape() || one.dtype() != two.dtype())
    return ::testing::AssertionFailure() << "shape or dtype differs";
  if (element_bytes(one) != element_bytes(two)) {
    const Tensor a = one.to(kFloat64).contiguous(), b = two.to(kFloat64).contiguous();
    for (int64_t i = 0; i < a.numel(); ++i)
      if (!(a.data<double>()[i] == b.data<double>()[i]))
        return ::testing::AssertionFailure() << "element " << i << ": " << repr(a.data<double>()[i])
                                             << " on 1 thread, " << repr(b.data<double>()[i])
                                             << " on 2";
    return ::testing::AssertionFailure() << "bytes differ (signed zeros or NaN payloads)";
  }
  return ::testing::AssertionSuccess();
}

// Shapes above the grain (32,768 elements), so that two threads really split them, with sizes
// that are not multiples of 64 so that the cuts fall inside rows.
std::vector<Shape> big_shapes() {
  return {{70001}, {300, 257}, {257, 300}, {3, 130, 97}, {2, 5, 7, 480}, {40000, 2}};
}

// The same values in a random layout: contiguous, permuted, strided or transposed storage.
Tensor random_input(std::mt19937_64& rng, const Shape& shape, DType dt) {
  Tensor t = random_layout(rng, random_values(rng, shape), dt);
  if (t.dim() >= 2 && uniform_int(rng, 0, 2) == 0) {  // storage transposed: the tiled paths
    t = t.transpose(0, t.dim() - 1).contiguous().transpose(0, t.dim() - 1);
  }
  return t;
}

}  // namespace

// Before anything sets it, the thread count is OMP_NUM_THREADS when that is a positive integer
// (tests/CMakeLists.txt runs this test again with OMP_NUM_THREADS=3, and with 0 and "abc",
// which PyTorch ignores), else the hardware threads.
TEST(Parallel, DefaultIsOmpNumThreadsOrTheHardware) {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int expected = hw;
  if (omp) {
    char* end = nullptr;
    const long n = std::strtol(omp, &end, 10);
    if (end != omp && *end == '\0' && n > 0) expected = static_cast<int>(n);
  }
  EXPECT_EQ(get_num_threads(), expected) << "OMP_NUM_THREADS=" << (omp ? omp : "(unset)");
}

TEST(Parallel, SetNumThreadsTakesPositiveCountsWithPyTorchsError) {
  ThreadsGuard guard;
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  // torch.set_num_threads(0) and (-1), PyTorch 1.13: RuntimeError with this text.
  EXPECT_TRUE(throws_with<RuntimeError>([] { set_num_threads(0); },
                                        "set_num_threads expects a positive integer"));
  EXPECT_TRUE(throws_with<RuntimeError>([] { set_num_threads(-1); },
                                        "set_num_threads expects a positive integer"));
  EXPECT_EQ(get_num_threads(), 1);  // unchanged by the refusals
}

TEST(Parallel, ParallelForCutsTheRangeIntoDisjointChunks) {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(100), int64_t(100000), int64_t(100001)}) {
      std::mutex m;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      detail::parallel_for(5, 5 + n, 1000, [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(m);
        chunks.emplace_back(b, e);
      });
      std::sort(chunks.begin(), chunks.end());
      int64_t at = 5;
      for (auto [b, e] : chunks) {
        EXPECT_EQ(b, at);
        EXPECT_GE(e - b, std::min<int64_t>(n, 1000));  // at least the grain, unless all is less
        at = e;
      }
      EXPECT_EQ(at, 5 + n);
      const size_t most = n <= 1000 ? (n ? 1 : 0) : static_cast<size_t>(threads);
      EXPECT_EQ(chunks.size(), most) << threads << " threads, n = " << n;
    }
  }
}

TEST(Parallel, SmallRangesAndNestedLoopsRunInline) {
  ThreadsGuard guard;
  set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  detail::parallel_for(0, detail::kGrainSize, detail::kGrainSize, [&](int64_t b, int64_t e) {
    ++calls;  // not atomic: only the caller may run this
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, detail::kGrainSize);
  });
  EXPECT_EQ(calls, 1);
  // Inside a chunk, on whichever thread, a parallel_for is one inline call.
  std::atomic<int> inner_calls{0};
  detail::parallel_for(0, 1000, 1, [&](int64_t, int64_t) {
    EXPECT_TRUE(detail::in_parallel_region());
    const auto here = std::this_thread::get_id();
    detail::parallel_for(0, 1000000, 1, [&](int64_t b, int64_t e) {
      EXPECT_EQ(std::this_thread::get_id(), here);
      EXPECT_EQ(e - b, 1000000);
      ++inner_calls;
    });
  });
  EXPECT_EQ(inner_calls.load(), 2);
  EXPECT_FALSE(detail::in_parallel_region());
}

TEST(Parallel, AnExceptionInAWorkerIsRethrownOnTheCaller) {
  ThreadsGuard guard;
  set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> worker_ran{false};
  for (int attempt = 0; attempt < 20 && !worker_ran; ++attempt) {
    EXPECT_TRUE(throws_with<IndexError>(
        [&] {
          detail::parallel_for(0, 2, 1, [&](int64_t b, int64_t) {
            if (std::this_thread::get_id() != caller) {
              worker_ran = true;
              throw IndexError("index 7 is out of bounds for dimension 0 with size 3");
            }
            // The caller's chunk waits a little, so that the worker claims the other one.
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (b == 1) throw IndexError("index 7 is out of bounds for dimension 0 with size 3");
          });
        },
        "index 7 is out of bounds"));
  }
  EXPECT_TRUE(worker_ran.load());
  // The pool still works afterwards.
  std::atomic<int64_t> total{0};
  detail::parallel_for(0, 100000, 1, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 100000);
}

// A child of fork() inherits no pool threads; it must build a fresh pool instead of waiting for
// threads that do not exist. The child also checks that a small op starts no thread.
TEST(Parallel, AForkedChildGetsAFreshPoolAndSmallOpsStartNone) {
  ThreadsGuard guard;
  set_num_threads(2);
  const Tensor a = randn({1000, 1000}), b = randn({1000, 1000});
  const Tensor expected = add(a, b);  // the parent's pool is running now
  ASSERT_GE(detail::pool_threads(), 1);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);  // a hang becomes a failure
    int status = 0;
    if (detail::pool_threads() != 0) status |= 1;
    const Tensor small = add(randn({1, 8}), randn({1, 8}));
    if (detail::pool_threads() != 0) status |= 2;  // 8 elements: no thread started
    if (!equal(add(a, b), expected)) status |= 4;
    if (detail::pool_threads() != 1) status |= 8;
    _exit(status);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bit 1: threads inherited, 2: a small op started one, "
                                       "4: wrong result, 8: no thread for a large op";
}

TEST(Parallel, ElementwiseOpsGiveTheSameBitsOnOneAndTwoThreads) {
  TINY_SEEDED(rng);
  const std::vector<DType> dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32};
  for (const Shape& shape : big_shapes()) {
    for (DType dt : dtypes) {
      SCOPED_TRACE(format_tuple(shape) + " " + dtype_legacy_name(dt));
      const Tensor x = random_input(rng, shape, dt), y = random_input(rng, shape, dt);
      // A broadcast: y's last row against every row of x, and a scalar.
      const Tensor row = y.dim() >= 2 ? y.select(0, 0) : y.narrow(0, 0, 1);
      EXPECT_TRUE(same_on_1_and_2_threads([&] { return add(x, y); }));
      // And right: the sum of two values of these dtypes is exact in float64, so rounding it to
      // the dtype is what the op must give (a plain loop over row-major float64 copies).
      {
        const Tensor xd = x.to(kFloat64).contiguous(), yd = y.to(kFloat64).contiguous();
        Tensor ref = empty(shape, kFloat64);
        for (int64_t i = 0; i < ref.numel(); ++i)
          ref.data<double>()[i] = xd.data<double>()[i] + yd.data<double>()[i];
        EXPECT_TRUE(close(add(x, y), ref.to(dt), 0, 0));
      }
      EXPECT_TRUE(same_on_1_and_2_threads([&] { return mul(x, row); }));
      EXPECT_TRUE(same_on_1_and_2_threads([&] { return sub(row, x); }));
      EXPECT_TRUE(same_on_1_and_2_threads([&] { return gt(x, y); }));
      EXPECT_TRUE(same_on_1_and_2_threads([&] { return where(gt(x, row), x, y); }));
      if (is_floating(dt)) {
        // Into a destination full of NaN: an element no thread wrote would stay NaN.
        EXPECT_TRUE(same_on_1_and_2_threads([&] {
          Tensor out = full(shape, NAN, dt);
          add_out(out, x, y);
          return out;
        }));
        EXPECT_TRUE(same_on_1_and_2_threads([&] { return exp(x); }));
        EXPECT_TRUE(same_on_1_and_2_threads([&] { return tanh(x); }));
        EXPECT_TRUE(same_on_1_and_2_threads([&] { return div(x, add(y, scalar_tensor(3.0, dt))); }));
      }
      // In place, into a destination in a transposed layout (the output read across its rows).
      EXPECT_TRUE(same_on_1_and_2_threads([&] {
        Tensor out = x.dim() >= 2 ? y.transpose(0, 1).contiguous().transpose(0, 1) : y.clone();
        out.add_(x);
        return out;
      }));
    }
  }
}

// Float32 results of kStreamBytes or more go to memory with streaming stores, in blocks of
// kStreamBlock computed into a buffer first (cpu/elementwise.h), by the block loop of the
// processor's instruction set or, asked for here too, the plain x86-64 one. The destination
// starts 3 elements past a 64-byte boundary (so the first elements are written the ordinary
// way) and its rows are not whole blocks; the elements around it must stay NaN, and every
// element must be the exact sum (two floats' sum rounded once, computed in float64), on one and
// on two threads.
TEST(Parallel, LargeFloat32ResultsWrittenAroundTheCachesAreExact) {
  TINY_SEEDED(rng);
  const int64_t big = detail::kStreamBytes / 4 + 4099;  // elements: just over the threshold
  for (const Shape& shape : std::vector<Shape>{{big}, {2053, (big + 2052) / 2053}}) {
    SCOPED_TRACE(format_tuple(shape));
    const Tensor x = random_values(rng, shape).to(kFloat32), y = random_values(rng, shape).to(kFloat32);
    const int64_t n = x.numel();
    ThreadsGuard guard;
    using detail::cpu::Isa;
    for (const Isa isa : {Isa::Avx512, Isa::Baseline})
      for (int threads : {1, 2}) {
        const Isa before = detail::cpu::set_cpu_isa(isa);
        SCOPED_TRACE(detail::cpu::isa_name(detail::cpu::cpu_isa()));
        set_num_threads(threads);
        Tensor buffer = full({n + 16}, NAN, kFloat32);  // 64-byte aligned, like every allocation
        Tensor out = buffer.narrow(0, 3, n).view(shape);
        add_out(out, x, y);
        const float* b = buffer.data<float>();
        const float *px = x.data<float>(), *py = y.data<float>();
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i)
          wrong += b[3 + i] != static_cast<float>(double(px[i]) + double(py[i]));
        EXPECT_EQ(wrong, 0) << threads << " thread(s)";
        for (int64_t i : {int64_t(0), int64_t(1), int64_t(2), n + 3, n + 15})
          EXPECT_TRUE(std::isnan(b[i]))
              << "element " << i << " outside the destination was written";
        // The same through an allocating op and a broadcast row, against the same reference.
        const Tensor row = y.dim() == 2 ? y.select(0, 0) : y;
        const Tensor z = mul(x, row);
        const float* pr = row.data<float>();
        const int64_t cols = row.numel();
        wrong = 0;
        for (int64_t i = 0; i < n; ++i)
          wrong += z.data<float>()[i] != static_cast<float>(double(px[i]) * double(pr[i % cols]));
        EXPECT_EQ(wrong, 0) << threads << " thread(s)";
        detail::cpu::set_cpu_isa(before);
      }
  }
}

// The vector math (exp, erf, tanh, ...) streams large float32 results too, from kStreamParts
// places in each thread's share of the row at once (stream_blocks, cpu/elementwise.h). Every
// element must have the bits the same op gives it in a small tensor, which is computed the
// ordinary way: results just over the threshold, whose parts are not whole blocks, of one input
// (gelu, exp, tanh), two (lerp) and three (lerp with a tensor of weights), on one and on two
// threads, streamed and not; and lerp_out into a destination 5 elements past a 64-byte
// boundary, with NaN guards around it.
TEST(Parallel, LargeVectorMathResultsAreStreamedWithTheSameBits) {
  TINY_SEEDED(rng);
  const int64_t n = detail::kStreamBytes / 4 + 4099;
  const Tensor x = random_values(rng, {n}).to(kFloat32), y = random_values(rng, {n}).to(kFloat32);
  const Tensor w = rand({n}, kFloat32);
  using Op = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"gelu", [](const Tensor& a, const Tensor&, const Tensor&) { return gelu(a); }},
      {"exp", [](const Tensor& a, const Tensor&, const Tensor&) { return exp(a); }},
      {"tanh", [](const Tensor& a, const Tensor&, const Tensor&) { return tanh(a); }},
      {"lerp", [](const Tensor& a, const Tensor& b, const Tensor&) { return lerp(a, b, 0.3); }},
      {"lerp (weights)",
       [](const Tensor& a, const Tensor& b, const Tensor& c) { return lerp(a, b, c); }}};
  ThreadsGuard guard;
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    // The reference, in pieces of 4096 elements: far below the threshold.
    Tensor expected = empty({n}, kFloat32);
    for (int64_t at = 0; at < n; at += 4096) {
      const int64_t len = std::min<int64_t>(4096, n - at);
      expected.narrow(0, at, len)
          .copy_(op(x.narrow(0, at, len), y.narrow(0, at, len), w.narrow(0, at, len)));
    }
    const auto* e = static_cast<const uint32_t*>(expected.data_ptr());
    // Each instruction set's copy of the loop (those this processor has), and two thread counts.
    using detail::cpu::Isa;
    struct Run {
      Isa isa;
      int threads;
      bool streamed;
    };
    const std::vector<Run> runs = {{Isa::Avx512, 1, true},
                                   {Isa::Avx512, 2, true},
                                   {Isa::Avx2, 2, true},
                                   {Isa::Baseline, 2, true},
                                   {Isa::Avx512, 2, false}};
    VectorMathStreamingGuard streaming;
    for (const auto& [isa, threads, streamed] : runs) {
      const Isa before = detail::cpu::set_cpu_isa(isa);
      set_num_threads(threads);
      detail::cpu::set_vector_math_streams(streamed);
      const Tensor result = op(x, y, w);
      const auto* r = static_cast<const uint32_t*>(result.data_ptr());
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += r[i] != e[i];
      EXPECT_EQ(wrong, 0) << threads << " thread(s), "
                          << detail::cpu::isa_name(detail::cpu::cpu_isa())
                          << (streamed ? ", streamed" : ", ordinary stores");
      if (name == "lerp (weights)") {
        Tensor buffer = full({n + 16}, NAN, kFloat32);
        lerp_out(buffer.narrow(0, 5, n), x, y, w);
        const auto* b = static_cast<const uint32_t*>(buffer.data_ptr());
        wrong = 0;
        for (int64_t i = 0; i < n; ++i) wrong += b[5 + i] != e[i];
        EXPECT_EQ(wrong, 0) << threads << " thread(s), lerp_out";
        for (int64_t i : {int64_t(0), int64_t(4), n + 5, n + 15})
          EXPECT_TRUE(std::isnan(buffer.data<float>()[i])) << "element " << i << " was written";
      }
      detail::cpu::set_cpu_isa(before);
    }
  }
}

TEST(Parallel, CopiesAndConversionsGiveTheSameBitsOnOneAndTwoThreads) {
  TINY_SEEDED(rng);
  const std::vector<DType> dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool};
  for (const Shape& shape : big_shapes()) {
    for (DType from : dtypes) {
      const Tensor x = random_input(rng, shape, from == kBool ? kFloat32 : from);
      const Tensor src = from == kBool ? gt(x, scalar_tensor(0.0, kFloat32)) : x;
      SCOPED_TRACE(format_tuple(shape) + " from " + dtype_legacy_name(from));
      EXPECT_TRUE(same_on_1_and_2_threads([&] { return src.contiguous().clone(); }));
      if (src.dim() >= 2) {
        EXPECT_TRUE(same_on_1_and_2_threads([&] { return src.transpose(0, 1).contiguous(); }));
      }
      for (DType to : dtypes)
        EXPECT_TRUE(same_on_1_and_2_threads([&] { return src.to(to); }));
      // copy_ into a strided destination, and from a broadcast source.
      EXPECT_TRUE(same_on_1_and_2_threads([&] {
        Tensor dst = full(src.shape(), NAN, kFloat32);  // an element not written stays NaN
        dst.copy_(src);
        return dst;
      }));
      if (src.dim() >= 2) {
        EXPECT_TRUE(same_on_1_and_2_threads([&] {
          Tensor dst = empty(src.shape(), src.dtype());
          dst.copy_(src.select(0, 1));  // every row of dst the same row of src
          return dst;
        }));
      }
    }
  }
}

namespace {

// Sums of x over `dims` in float64, by plain loops over a contiguous float64 copy.
Tensor reference_sum(const Tensor& x, const std::set<int64_t>& dims) {
  const Tensor c = x.to(kFloat64).contiguous();
  const double* p = c.data<double>();
  Shape kept = x.shape();
  for (int64_t d : dims) kept[d] = 1;
  Tensor out = zeros(kept, kFloat64);
  double* o = out.data<double>();
  const Strides& os = out.strides();
  std::vector<int64_t> idx(x.dim(), 0);
  for (int64_t i = 0; i < c.numel(); ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (!dims.count(d)) off += idx[d] * os[d];
    o[off] += p[i];
    for (int64_t d = x.dim(); d-- > 0;)
      if (++idx[d] < x.size(d)) break;
      else idx[d] = 0;
  }
  return out;
}

// The sum of |x| over the same dimensions: the scale of the rounding a float64 sum may carry.
Tensor reference_abs_sum(const Tensor& x, const std::set<int64_t>& dims) {
  return reference_sum(abs(x.to(kFloat64)), dims);
}

}  // namespace

TEST(Parallel, SumsGiveTheSameBitsOnOneAndTwoThreadsAndMatchFloat64) {
  TINY_SEEDED(rng);
  const std::vector<DType> dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kBool};
  std::vector<Shape> shapes = big_shapes();
  shapes.push_back({1000, 1000});
  for (const Shape& shape : shapes) {
    for (DType dt : dtypes) {
      const Tensor v = random_input(rng, shape, dt == kBool ? kFloat32 : dt);
      const Tensor x = dt == kBool ? gt(v, scalar_tensor(0.0, kFloat32)) : v;
      // Every dimension, the last, the first, the first and last, and all but the last.
      std::vector<std::set<int64_t>> choices = {{}, {x.dim() - 1}, {0}};
      if (x.dim() >= 3) choices.push_back({0, x.dim() - 1});
      if (x.dim() >= 2) {
        std::set<int64_t> lead;
        for (int64_t d = 0; d + 1 < x.dim(); ++d) lead.insert(d);
        choices.push_back(lead);
      }
      for (const auto& dims : choices) {
        std::vector<int64_t> list(dims.begin(), dims.end());
        SCOPED_TRACE(format_tuple(shape) + " " + dtype_legacy_name(dt) + " over " +
                     (list.empty() ? std::string("all") : format_tuple(list)));
        auto run = [&] { return list.empty() ? sum(x) : sum(x, list); };
        ASSERT_TRUE(same_on_1_and_2_threads(run));
        // The plain x86-64 copy of the sum loops (and the AVX2 one, on a processor with
        // AVX-512) must give the bits of the copy the processor runs: the same lanes, the same
        // order, written by the compiler in one and by hand in another (cpu/reduce.cpp).
        const std::string best = element_bytes(run());
        using detail::cpu::Isa;
        for (const Isa isa : {Isa::Baseline, Isa::Avx2}) {
          if (isa >= detail::cpu::detected_isa()) continue;
          const Isa before = detail::cpu::set_cpu_isa(isa);
          const std::string lesser = element_bytes(run());
          detail::cpu::set_cpu_isa(before);
          EXPECT_TRUE(lesser == best) << detail::cpu::isa_name(isa) << " copy differs";
        }
        // Nor may how the loop asks for memory ahead (sum_prefetch(), isa.h), which on AMD's
        // processors follows the huge-pages switch.
        const bool huge = detail::cpu::set_huge_pages(!detail::cpu::huge_pages());
        const std::string flipped = element_bytes(run());
        detail::cpu::set_huge_pages(huge);
        EXPECT_TRUE(flipped == best) << "the prefetch policy changed the bits";
        if (is_floating(dt)) {
          EXPECT_TRUE(
              same_on_1_and_2_threads([&] { return list.empty() ? mean(x) : mean(x, list); }));
        }
        std::set<int64_t> all;
        for (int64_t d = 0; d < x.dim(); ++d) all.insert(d);
        const std::set<int64_t>& ref_dims = list.empty() ? all : dims;
        Shape out_shape;
        for (int64_t d = 0; d < x.dim(); ++d)
          if (!ref_dims.count(d)) out_shape.push_back(x.size(d));
        const Tensor ref = reference_sum(x, ref_dims).reshape(out_shape);
        // Accumulated in float64 and rounded once to the dtype: half an epsilon of the result,
        // plus float64 rounding relative to the sum of magnitudes (1e-16 per term, over at most
        // 1e6 terms). Integer sums are exact.
        const Tensor scale = reference_abs_sum(x, ref_dims).reshape(out_shape);
        const double atol = is_floating(dt) ? 1e-10 * max(scale).item() : 0;
        EXPECT_TRUE(close(run(), ref, atol, eps_of(dt)));
      }
    }
  }
}
