// fusion_test.cpp: compile() (fusion.h). Fused results against eager ones over random chains,
// shapes, layouts, broadcasts and dtypes, on both CPU backends (generated C++ and the tile
// interpreter); the signature cache and recompiles; graph breaks; the compiled backward against
// eager gradients; the generated source and the disk cache.
#include <cstdlib>
#include <filesystem>

#include "fusion/cuda_jit.h"
#include "fusion/graph.h"
#include "test_util.h"

namespace tiny {
namespace {

using testing::close;
using testing::random_layout;
using testing::random_values;
using testing::uniform_int;

Tensor gelu_scale_shift(const Tensor& x, const Tensor& g, const Tensor& b) {
  return gelu(x) * g + b + x;
}
Tensor scale_shift(const Tensor& x, const Tensor& g, const Tensor& b) { return x * g + b + x; }

// A private disk cache per test process, so that tests see their own compiles.
class Fusion : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tiny_fusion_test_" + std::to_string(::getpid()));
    setenv("TINY_FUSION_CACHE", dir_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("TINY_FUSION_CACHE");
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::filesystem::path dir_;
};

TEST_F(Fusion, TheDocumentsChainsMatchEager) {
  TINY_SEEDED(rng);
  Generator gen(rng());
  const Tensor x = randn({64, 96}, kFloat32, gen);
  const Tensor g = randn({96}, kFloat32, gen), b = randn({96}, kFloat32, gen);
  auto fast = compile(scale_shift);
  fast(x, g, b);  // the first call traces: its result is eager's own
  // No transcendental function: the same float32 operations in the same order, so the same bits.
  EXPECT_TRUE(close(fast(x, g, b), scale_shift(x, g, b), 0, 0));
  EXPECT_NE(fast.backend().find("C++ kernel"), std::string::npos) << fast.backend();
  auto fast_gelu = compile(gelu_scale_shift);
  fast_gelu(x, g, b);
  EXPECT_TRUE(close(fast_gelu(x, g, b), gelu_scale_shift(x, g, b), 1e-6, 1e-6));
}

// Large outputs run in parts on the library's threads, each part a range of the outermost loop
// (or, for a single loop, a multiple of 256 elements): the parts must cover every element once,
// and the bits must not depend on the number of threads.
TEST_F(Fusion, ThreadedKernelsGiveTheSameBitsOnAnyThreadCount) {
  TINY_SEEDED(rng);
  Generator gen(rng());
  const int saved = get_num_threads();
  // A matrix with broadcast rows (a 2-deep loop nest) and a long odd-sized vector (one loop).
  const Tensor x = randn({301, 263}, kFloat32, gen), g = randn({263}, kFloat32, gen),
               b = randn({263}, kFloat32, gen);
  const Tensor v = randn({100003}, kFloat32, gen), w = randn({100003}, kFloat32, gen);
  auto fast = compile(scale_shift);
  auto fast_vec = compile([](const Tensor& p, const Tensor& q) { return p * q + p; });
  fast(x, g, b);
  fast_vec(v, w);
  std::string one, two, one_vec, two_vec;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const Tensor r = fast(x, g, b), r_vec = fast_vec(v, w);
    EXPECT_TRUE(close(r, scale_shift(x, g, b), 0, 0)) << threads << " threads";
    EXPECT_TRUE(close(r_vec, v * w + v, 0, 0)) << threads << " threads";
    (threads == 1 ? one : two) = testing::element_bytes(r);
    (threads == 1 ? one_vec : two_vec) = testing::element_bytes(r_vec);
    if (threads > 1) {
      EXPECT_EQ(one, two) << threads << " threads";
      EXPECT_EQ(one_vec, two_vec) << threads << " threads";
    }
  }
  set_num_threads(saved);
  EXPECT_EQ(fast.stats().recompiles, 0);  // the thread count is not part of the signature
}

TEST_F(Fusion, SignatureCacheAndRecompiles) {
  auto fast = compile(scale_shift);
  const Tensor x = randn({8, 16}), g = randn({16}), b = randn({16});
  fast(x, g, b);
  fast(x, g, b);
  EXPECT_EQ(fast.stats().calls, 2);
  EXPECT_EQ(fast.stats().compiles, 1);
  EXPECT_EQ(fast.stats().cache_hits, 1);
  EXPECT_EQ(fast.stats().recompiles, 0);
  // A new shape, then a new layout: each a recompile. Back to the first: a hit.
  fast(randn({4, 16}), g, b);
  fast(x.t().contiguous().t(), g, b);
  EXPECT_EQ(fast.stats().recompiles, 2);
  fast(x, g, b);
  EXPECT_EQ(fast.stats().cache_hits, 2);
  EXPECT_EQ(fast.stats().graph_breaks, 0);
}

TEST_F(Fusion, GraphBreaksRunEagerlyAndSayWhy) {
  auto with_matmul = compile([](const Tensor& a, const Tensor& w) { return relu(matmul(a, w)) + a; });
  const Tensor a = randn({4, 4}), w = randn({4, 4});
  EXPECT_TRUE(close(with_matmul(a, w), relu(matmul(a, w)) + a, 0, 0));
  EXPECT_TRUE(close(with_matmul(a, w), relu(matmul(a, w)) + a, 0, 0));
  EXPECT_EQ(with_matmul.stats().graph_breaks, 2);
  EXPECT_NE(with_matmul.stats().last_break.find("no captured op made"), std::string::npos)
      << with_matmul.stats().last_break;
  EXPECT_NE(with_matmul.backend().find("eager (graph break"), std::string::npos);
}

TEST_F(Fusion, InPlaceOpsAndWrongCallsAreRefusedClearly) {
  auto in_place = compile([](const Tensor& a) {
    Tensor t = a * 2.0;
    t.add_(1.0);
    return t;
  });
  const Tensor a = randn({3});
  EXPECT_TRUE(close(in_place(a), a * 2.0 + 1.0, 0, 0));
  EXPECT_NE(in_place.stats().last_break.find("in place"), std::string::npos)
      << in_place.stats().last_break;
  auto two = compile([](const Tensor& x, const Tensor& y) { return x + y; });
  try {
    two(a);
    FAIL() << "no error for one argument";
  } catch (const TypeError& e) {
    EXPECT_STREQ(e.what(), "compiled function takes 2 tensor arguments but 1 were given");
  }
}

TEST_F(Fusion, DiskCacheServesASecondProcessAndTheSourceIsReadable) {
  const Tensor x = randn({5, 7}), g = randn({7}), b = randn({7});
  auto first = compile(scale_shift);
  first(x, g, b);
  EXPECT_EQ(first.stats().disk_cache_hits, 0);
  // A new compiled function (as in a new process) finds the shared object on disk.
  auto second = compile(scale_shift);
  second(x, g, b);
  EXPECT_EQ(second.stats().disk_cache_hits, 1);
  size_t shared_objects = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    shared_objects += entry.path().extension() == ".so";
  EXPECT_EQ(shared_objects, 1u);
  // The source names each value and pastes the op table's expressions.
  const std::string src = second.source();
  EXPECT_NE(src.find("extern \"C\" void tiny_fused_kernel(char* const* data, long long begin, "
                     "long long end)"),
            std::string::npos);
  EXPECT_NE(src.find("return x * y;"), std::string::npos) << src;  // mul's row
  EXPECT_NE(src.find("%2 = mul(%0, %1)"), std::string::npos) << src;
  // The kernel carries the library's float16 conversions instead of including its headers, so
  // that it compiles where only an installed library, no source tree, is present.
  EXPECT_EQ(src.find("#include \"tiny/"), std::string::npos) << src;
  EXPECT_NE(src.find("inline float half_bits_to_float(uint16_t h)"), std::string::npos) << src;
}

TEST_F(Fusion, WithoutACompilerTheInterpreterRunsAndSaysSo) {
  setenv("TINY_FUSION_CXX", "/nonexistent/c++", 1);
  auto fast = compile(gelu_scale_shift);
  const Tensor x = randn({6, 9}), g = randn({9}), b = randn({9});
  fast(x, g, b);
  const Tensor r = fast(x, g, b);
  unsetenv("TINY_FUSION_CXX");
  EXPECT_EQ(fast.backend(),
            "tile interpreter (no C++ compiler to generate code with: no compiler at "
            "/nonexistent/c++)");
  EXPECT_TRUE(close(r, gelu_scale_shift(x, g, b), 1e-6, 1e-6));
  // Asked for generated code explicitly, it refuses instead of silently interpreting.
  setenv("TINY_FUSION_CXX", "/nonexistent/c++", 1);
  auto strict = compile(gelu_scale_shift, {FusionBackend::Cpp});
  EXPECT_THROW(strict(x, g, b), RuntimeError);
  unsetenv("TINY_FUSION_CXX");
}

TEST_F(Fusion, CostCountsOnePassPerInputAndOutput) {
  const Tensor x = randn({64, 32}), g = randn({32}), b = randn({32});
  auto fast = compile(gelu_scale_shift);
  fast(x, g, b);
  // gelu, mul, add, add: one FLOP each per element by the op table's convention; x read, g and
  // b read (one row each), the result written.
  EXPECT_EQ(fast.cost().flops, 4.0 * 64 * 32);
  EXPECT_EQ(fast.cost().bytes, 4.0 * (64 * 32 + 32 + 32 + 64 * 32));
  const CostCounter counter;
  fast(x, g, b);
  EXPECT_EQ(counter.ops(), 1);
  EXPECT_EQ(counter.bytes(), fast.cost().bytes);
}

TEST_F(Fusion, ZeroDimAndEmptyTensors) {
  for (FusionBackend backend : {FusionBackend::Cpp, FusionBackend::Interpreter}) {
    auto fast = compile([](const Tensor& a, const Tensor& b) { return gelu(a) * b + 1.0; },
                        {backend});
    const Tensor s = scalar_tensor(0.75), t = scalar_tensor(-2.0);
    fast(s, t);
    EXPECT_TRUE(close(fast(s, t), gelu(s) * t + 1.0, 1e-7, 1e-7));
    EXPECT_EQ(fast(s, t).dim(), 0);
    const Tensor e = randn({0, 3}), r = randn({3});
    fast(e, r);
    EXPECT_EQ(fast(e, r).shape(), (Shape{0, 3}));
    EXPECT_EQ(fast.stats().graph_breaks, 0) << fast.stats().last_break;
  }
}

// An int64 input is loaded and converted as any other dtype is, in generated C++ and in CUDA
// source. C++ has no functional cast to a type of two words ("long long(x)" does not compile),
// so the kernels spell int64's conversions otherwise. Each result is eager's, bit for bit: the
// integers convert exactly, and the float math is the eager kernels'.
TEST_F(Fusion, Int64InputsCompileAndMatchEager) {
  const Tensor i = arange(-3, 5), j = arange(1, 9);  // int64
  const Tensor h = arange(8.0).to(kFloat16) * 0.25;
  Tensor w = randn({8}).requires_grad_(true);
  auto sqrt_of = [](const Tensor& x) { return x.sqrt(); };
  auto quotient = [](const Tensor& x, const Tensor& y) { return x / y; };
  auto sum = [](const Tensor& x, const Tensor& y) { return x + y; };
  auto product = [](const Tensor& x, const Tensor& y) { return x * y; };
  auto check = [](CompiledFunction& fast, const std::vector<Tensor>& in, const Tensor& expected) {
    fast.call(in);  // traces
    const Tensor r = fast.call(in);
    EXPECT_EQ(fast.stats().graph_breaks, 0) << fast.stats().last_break;
    EXPECT_NE(fast.backend().find("C++ kernel"), std::string::npos) << fast.backend();
    EXPECT_EQ(r.dtype(), expected.dtype());
    EXPECT_EQ(testing::element_bytes(r), testing::element_bytes(expected)) << fast.source();
  };
  const CompileOptions cpp{FusionBackend::Cpp};
  {
    SCOPED_TRACE("sqrt(int64)");
    CompiledFunction fast = compile(sqrt_of, cpp);
    check(fast, {j}, sqrt_of(j));
  }
  {
    SCOPED_TRACE("int64 / int64");
    CompiledFunction fast = compile(quotient, cpp);
    check(fast, {i, j}, quotient(i, j));
  }
  {
    SCOPED_TRACE("float16 + int64");
    CompiledFunction fast = compile(sum, cpp);
    check(fast, {h, i}, sum(h, i));
  }
  {
    // The backward kernel reads the int64 input too: d(w * i)/dw = i.
    SCOPED_TRACE("float32 * int64, backward");
    CompiledFunction fast = compile(product, cpp);
    const Tensor y = fast(w, i);
    EXPECT_EQ(fast.stats().graph_breaks, 0) << fast.stats().last_break;
    ASSERT_TRUE(y.grad_fn());
    EXPECT_EQ(y.grad_fn()->name(), "CompiledFunctionBackward");
    EXPECT_NE(fast.backend().find("C++ kernel"), std::string::npos) << fast.backend();
    y.sum().backward();
    const Tensor fused = w.grad();
    w.set_grad(Tensor());
    const Tensor expected = product(w, i);
    expected.sum().backward();
    EXPECT_EQ(testing::element_bytes(y), testing::element_bytes(expected));
    EXPECT_EQ(testing::element_bytes(fused), testing::element_bytes(w.grad()))
        << fast.backward_source();
  }
  // The same graphs as CUDA source, forward and backward, compiled by NVRTC (no GPU needed).
  if (!detail::jit::nvrtc_available()) return;
  struct Case {
    std::function<Tensor(const std::vector<Tensor>&)> fn;
    std::vector<Tensor> in;
  };
  const std::vector<Case> cases = {
      {[&](const std::vector<Tensor>& a) { return sqrt_of(a[0]); }, {j}},
      {[&](const std::vector<Tensor>& a) { return quotient(a[0], a[1]); }, {i, j}},
      {[&](const std::vector<Tensor>& a) { return sum(a[0], a[1]); }, {h, i}},
      {[&](const std::vector<Tensor>& a) { return product(a[0], a[1]); }, {w, i}}};
  for (const auto& [fn, in] : cases) {
    detail::fusion::Tracer tracer(in);
    Tensor out;
    {
      const NoGradGuard plain;
      out = fn(in);
    }
    const detail::fusion::Graph g = tracer.finish({out});
    ASSERT_TRUE(tracer.failure().empty()) << tracer.failure();
    std::vector<bool> needs;
    for (const Tensor& t : in) needs.push_back(t.requires_grad());
    std::string reason;
    const detail::fusion::BackwardGraph bg =
        detail::fusion::backward_graph(tracer, g, needs, reason);
    ASSERT_TRUE(reason.empty()) << reason;
    for (const auto* graph : {&g, &bg.graph}) {
      if (graph->values.empty()) continue;  // no input needs a gradient
      const std::string src = detail::fusion::cuda_source(*graph, "tiny_fused_kernel");
      SCOPED_TRACE(src);
      EXPECT_NE(detail::jit::nvrtc_compile(src, "fused.cu", 90).find(".entry tiny_fused_kernel"),
                std::string::npos);
    }
  }
}

// A 0-dim tensor the function captures is not a number it made: written (fill_) or re-bound
// after the trace, or given a gradient, it must act as it does eagerly, so it is a graph break
// (as a captured tensor of shape [1] is). So is a maximum the function computes eagerly, which
// the next call's input changes. A 0-dim tensor the function makes from a number stays a
// constant of the kernel.
TEST_F(Fusion, CapturedZeroDimTensorsAreNotBakedIn) {
  for (FusionBackend backend : {FusionBackend::Cpp, FusionBackend::Interpreter}) {
    SCOPED_TRACE(backend == FusionBackend::Cpp ? "generated C++" : "tile interpreter");
    const Tensor x = arange(3.0);
    Tensor w = scalar_tensor(2.0);
    auto scaled = compile([&w](const Tensor& t) { return t * w; }, {backend});
    EXPECT_TRUE(close(scaled(x), x * 2.0, 0, 0));
    EXPECT_TRUE(close(scaled(x), x * 2.0, 0, 0));
    w.fill_(5);
    EXPECT_TRUE(close(scaled(x), x * 5.0, 0, 0));
    w = scalar_tensor(-3.0);  // re-bound: the function reads another tensor now
    EXPECT_TRUE(close(scaled(x), x * -3.0, 0, 0));
    EXPECT_EQ(scaled.stats().compiles, 1);
    EXPECT_EQ(scaled.stats().graph_breaks, 4);
    EXPECT_NE(scaled.stats().last_break.find("mul uses a 0-dim float32 tensor"), std::string::npos)
        << scaled.stats().last_break;
    // A parameter gets eager's gradient, from the first call (the trace) on.
    Tensor p = nn::Parameter(scalar_tensor(2.0));
    auto by_p = compile([&p](const Tensor& t) { return t * p; }, {backend});
    for (int call = 0; call < 2; ++call) {
      p.set_grad(Tensor());
      by_p(x).sum().backward();
      ASSERT_TRUE(p.grad().defined()) << "call " << call;
      EXPECT_EQ(p.grad().item(), 3.0) << "call " << call;
    }
    auto by_max = compile([](const Tensor& t) { return t * t.max(); }, {backend});
    by_max(x);
    EXPECT_TRUE(close(by_max(x + 1.0), (x + 1.0) * (x + 1.0).max(), 0, 0));
    auto halved = compile([](const Tensor& t) { return t * scalar_tensor(0.5) + 1.0; }, {backend});
    halved(x);
    EXPECT_TRUE(close(halved(x), x * 0.5 + 1.0, 0, 0));
    EXPECT_EQ(halved.stats().graph_breaks, 0) << halved.stats().last_break;
  }
}

// The interpreter computes what the generated kernel computes, bit for bit: the same math in
// the same compute type, on any thread count. The large cases (over 8 MB of float32) are split
// across threads and written with streaming stores, and their generated kernels compute four
// rows at a time where an operand is broadcast along the rows, the last rows of a part one at a
// time: 1031 rows do not divide by 4, rows of 2053 elements are not a whole number of tiles or
// blocks (nor 16-byte aligned), the transposed input is read with a stride, and the 3-D case
// has its shared rows inside an outer loop (g varies along the first dimension only). Without
// a broadcast operand the kernel streams from four places in its range (or row) side by side,
// whole blocks each, and the rest one block at a time: a vector of an odd length, and rows of
// 2053 elements read through a transposed input.
TEST_F(Fusion, InterpreterMatchesGeneratedCodeBitForBit) {
  TINY_SEEDED(rng);
  Generator gen(rng());
  const int saved = get_num_threads();
  struct Case {
    Tensor x, g, b;
  };
  const Tensor g = randn({2053}, kFloat32, gen), b = randn({2053}, kFloat32, gen);
  const std::vector<Case> cases = {
      {randn({33, 70}, kFloat32, gen), randn({70}, kFloat32, gen), randn({70}, kFloat32, gen)},
      {randn({1031, 2053}, kFloat32, gen), g, b},
      {randn({2053, 1031}, kFloat32, gen).T(), g, b},
      {randn({3, 347, 2053}, kFloat32, gen), randn({3, 1, 2053}, kFloat32, gen), b},
      {randn({2100007}, kFloat32, gen), randn({2100007}, kFloat32, gen),
       randn({2100007}, kFloat32, gen)},
      {randn({2053, 1031}, kFloat32, gen).T(), randn({1031, 2053}, kFloat32, gen),
       randn({1031, 2053}, kFloat32, gen)}};
  auto cpp = compile(gelu_scale_shift);
  auto interpreted = compile(gelu_scale_shift, {FusionBackend::Interpreter});
  for (const Case& c : cases) {
    cpp(c.x, c.g, c.b);
    interpreted(c.x, c.g, c.b);
    const Tensor other = c.x * 2.0f;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      // As below for the interpreter: the result reuses the block of a different one.
      cpp(other, c.g, c.b);
      const Tensor expected = cpp(c.x, c.g, c.b);
      ASSERT_NE(cpp.backend().find("C++ kernel"), std::string::npos) << cpp.backend();
      EXPECT_TRUE(close(expected, gelu_scale_shift(c.x, c.g, c.b), 1e-6, 1e-6));
      // The allocator hands the result the block another call's result just gave back, so an
      // element the interpreter failed to write would hold that call's value.
      interpreted(other, c.g, c.b);
      const Tensor r = interpreted(c.x, c.g, c.b);
      EXPECT_NE(interpreted.backend().find("tile interpreter"), std::string::npos);
      EXPECT_EQ(testing::element_bytes(r), testing::element_bytes(expected))
          << threads << " threads, " << c.x.numel() << " elements, stride " << c.x.stride(0);
    }
    set_num_threads(saved);
  }
}

TEST_F(Fusion, BackwardMatchesEagerGradients) {
  TINY_SEEDED(rng);
  Generator gen(rng());
  Tensor x = randn({16, 24}, kFloat32, gen).requires_grad_(true);
  Tensor g = randn({24}, kFloat32, gen).requires_grad_(true);
  Tensor b = randn({24}, kFloat32, gen).requires_grad_(true);
  auto fast = compile(gelu_scale_shift);
  Tensor y = fast(x, g, b);
  EXPECT_EQ(y.grad_fn()->name(), "CompiledFunctionBackward") << fast.backend();
  y.sum().backward();
  const Tensor gx = x.grad(), gg = g.grad(), gb = b.grad();
  for (Tensor* t : {&x, &g, &b}) t->set_grad(Tensor());
  gelu_scale_shift(x, g, b).sum().backward();
  EXPECT_TRUE(close(gx, x.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(close(gg, g.grad(), 1e-4, 1e-5));
  EXPECT_TRUE(close(gb, b.grad(), 1e-5, 1e-5));
}

// ---- random chains ----------------------------------------------------------------------------

// A random program of elementwise ops over some inputs: each step applies one op to earlier
// values. Every op keeps values in a modest range (divisors are kept away from 0, exp's
// argument is clamped), so that float16 comparisons stay meaningful.
struct Step {
  int op, a, b;
};
constexpr int kOps = 16;

Tensor run_program(const std::vector<Step>& program, const std::vector<Tensor>& in) {
  std::vector<Tensor> v = in;
  for (const Step& s : program) {
    const Tensor& x = v[s.a];
    const Tensor& y = v[s.b];
    switch (s.op) {
      case 0: v.push_back(neg(x)); break;
      case 1: v.push_back(abs(x)); break;
      case 2: v.push_back(relu(x)); break;
      case 3: v.push_back(sigmoid(x)); break;
      case 4: v.push_back(tanh(x)); break;
      case 5: v.push_back(gelu(x)); break;
      case 6: v.push_back(x * 0.5); break;
      case 7: v.push_back(add(x, y)); break;
      case 8: v.push_back(sub(x, y)); break;
      case 9: v.push_back(mul(x, y)); break;
      case 10: v.push_back(maximum(x, y)); break;
      case 11: v.push_back(minimum(x, y)); break;
      case 12: v.push_back(clamp(x, -1.0, 1.0)); break;
      case 13: v.push_back(div(x, abs(y) + 1.0)); break;
      case 14: v.push_back(exp(clamp(x, -3.0, 3.0))); break;
      default: v.push_back(square(tanh(x)) - y); break;
    }
  }
  return v.back();
}

std::vector<Step> random_program(std::mt19937_64& rng, int inputs) {
  std::vector<Step> p;
  const int steps = static_cast<int>(uniform_int(rng, 1, 8));
  for (int i = 0; i < steps; ++i) {
    const int have = inputs + i;
    // The last step uses the newest value, so that the result depends on the whole chain.
    p.push_back({static_cast<int>(uniform_int(rng, 0, kOps - 1)),
                 i + 1 == steps ? have - 1 : static_cast<int>(uniform_int(rng, 0, have - 1)),
                 static_cast<int>(uniform_int(rng, 0, have - 1))});
  }
  return p;
}

// Inputs of shapes that broadcast together: each is the base shape with some leading dimensions
// dropped and some sizes set to 1, in a random layout.
std::vector<Tensor> random_inputs(std::mt19937_64& rng, int n, DType dtype) {
  const Shape base = testing::random_shape(rng, 3, 6);
  std::vector<Tensor> in;
  for (int k = 0; k < n; ++k) {
    Shape s(base.begin() + uniform_int(rng, 0, static_cast<int64_t>(base.size())), base.end());
    for (int64_t& d : s)
      if (uniform_int(rng, 0, 3) == 0) d = 1;
    if (k == 0) s = base;  // one input of the full shape
    in.push_back(random_layout(rng, random_values(rng, s), dtype));
  }
  return in;
}

// How close a fused result must be to the eager one: float32 and float64 differ only in the
// last bits of exp, erf and tanh; 16-bit floats are rounded after every eager op but kept in
// float32 between fused ops (as torch.compile keeps them), so they differ by a rounding or two.
double tolerance(DType d) {
  return d == kFloat64 ? 1e-12 : d == kFloat32 ? 2e-6 : d == kFloat16 ? 4e-3 : 3e-2;
}

void check_random_chains(FusionBackend backend) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 25; ++trial) {
    const DType dtype = std::array{kFloat32, kFloat64, kFloat16, kBFloat16}[trial % 4];
    const int n = static_cast<int>(uniform_int(rng, 1, 3));
    const std::vector<Step> program = random_program(rng, n);
    const std::vector<Tensor> in = random_inputs(rng, n, dtype);
    CompiledFunction fast(
        static_cast<size_t>(n), [program](const std::vector<Tensor>& a) { return run_program(program, a); },
        {backend});
    const Tensor expected = run_program(program, in);
    fast.call(in);  // traces (an eager call)
    const Tensor actual = fast.call(in);  // runs the kernel
    SCOPED_TRACE("trial " + std::to_string(trial) + ", " + dtype_name(dtype) + ", graph:\n" +
                 fast.graph());
    ASSERT_EQ(fast.stats().graph_breaks, 0) << fast.stats().last_break;
    ASSERT_EQ(actual.dtype(), expected.dtype());
    const double tol = tolerance(dtype);
    EXPECT_TRUE(close(actual.to(kFloat64), expected.to(kFloat64), tol, tol));
  }
}

TEST_F(Fusion, RandomChainsMatchEagerInGeneratedCpp) { check_random_chains(FusionBackend::Cpp); }
TEST_F(Fusion, RandomChainsMatchEagerInTheInterpreter) {
  check_random_chains(FusionBackend::Interpreter);
}

TEST_F(Fusion, RandomChainsBackwardMatchesEager) {
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 12; ++trial) {
    const DType dtype = trial % 2 ? kFloat64 : kFloat32;
    const int n = static_cast<int>(uniform_int(rng, 1, 3));
    const std::vector<Step> program = random_program(rng, n);
    std::vector<Tensor> in = random_inputs(rng, n, dtype);
    for (Tensor& t : in) t = t.detach().requires_grad_(true);
    CompiledFunction fast(static_cast<size_t>(n), [program](const std::vector<Tensor>& a) {
      return run_program(program, a);
    }, {});
    const Tensor y = fast.call(in);
    SCOPED_TRACE("trial " + std::to_string(trial) + ", graph:\n" + fast.graph());
    ASSERT_EQ(fast.stats().graph_breaks, 0) << fast.stats().last_break;
    ASSERT_EQ(y.grad_fn()->name(), "CompiledFunctionBackward");
    const Tensor weights = randn(y.shape(), dtype);  // a random incoming gradient
    y.backward(weights);
    std::vector<Tensor> fused;
    for (Tensor& t : in) {
      fused.push_back(t.grad());
      t.set_grad(Tensor());
    }
    run_program(program, in).backward(weights);
    const double tol = dtype == kFloat64 ? 1e-10 : 1e-4;
    for (size_t k = 0; k < in.size(); ++k) {
      ASSERT_EQ(fused[k].defined(), in[k].grad().defined()) << "input " << k;
      if (fused[k].defined()) {
        EXPECT_TRUE(close(fused[k], in[k].grad(), tol, tol)) << "input " << k;
      }
    }
  }
}

// ---- CUDA ---------------------------------------------------------------------------------------

// The CUDA source of random graphs, forward and backward, in every float dtype, compiled by
// NVRTC for sm_90. NVRTC needs no GPU, so this runs wherever the library was built with CUDA.
TEST_F(Fusion, GeneratedCudaCompilesWithNvrtc) {
  if (!detail::jit::nvrtc_available()) GTEST_SKIP() << "the library was built without CUDA";
  TINY_SEEDED(rng);
  for (int trial = 0; trial < 8; ++trial) {
    const DType dtype = std::array{kFloat32, kFloat64, kFloat16, kBFloat16}[trial % 4];
    const int n = static_cast<int>(uniform_int(rng, 1, 3));
    const std::vector<Step> program = random_program(rng, n);
    std::vector<Tensor> in = random_inputs(rng, n, dtype);
    std::vector<bool> needs(in.size(), is_floating(dtype));
    detail::fusion::Tracer tracer(in);
    Tensor out;
    {
      const NoGradGuard plain;
      out = run_program(program, in);
    }
    const detail::fusion::Graph g = tracer.finish({out});
    ASSERT_TRUE(tracer.failure().empty()) << tracer.failure();
    std::string reason;
    const detail::fusion::BackwardGraph bg = detail::fusion::backward_graph(tracer, g, needs, reason);
    for (const auto* graph : {&g, &bg.graph}) {
      if (graph->values.empty()) continue;  // a backward that could not be captured
      const std::string src = detail::fusion::cuda_source(*graph, "tiny_fused_kernel");
      SCOPED_TRACE(src);
      const std::string ptx = detail::jit::nvrtc_compile(src, "fused.cu", 90);
      EXPECT_NE(ptx.find(".entry tiny_fused_kernel"), std::string::npos);
    }
  }
}

// compile() on CUDA tensors: the NVRTC kernel against the eager CUDA ops (with a GPU only).
TEST_F(Fusion, CudaKernelsMatchEager) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  const Device gpu = Device::cuda(0);
  const Tensor x = randn({256, 384}).to(gpu), g = randn({384}).to(gpu), b = randn({384}).to(gpu);
  for (auto fn : {gelu_scale_shift, scale_shift}) {
    auto fast = compile(fn);
    fast(x, g, b);
    const Tensor r = fast(x, g, b);
    EXPECT_NE(fast.backend().find("CUDA kernel (NVRTC"), std::string::npos) << fast.backend();
    EXPECT_TRUE(close(r.to(Device::cpu()), fn(x, g, b).to(Device::cpu()), 1e-6, 1e-6));
  }
  Tensor xg = randn({64, 32}).to(gpu).requires_grad_(true);
  Tensor gg = randn({32}).to(gpu).requires_grad_(true);
  auto fast = compile(gelu_scale_shift);
  fast(xg, gg, gg).sum().backward();
  const Tensor fused_x = xg.grad(), fused_g = gg.grad();
  xg.set_grad(Tensor());
  gg.set_grad(Tensor());
  gelu_scale_shift(xg, gg, gg).sum().backward();
  EXPECT_TRUE(close(fused_x.to(Device::cpu()), xg.grad().to(Device::cpu()), 1e-5, 1e-5));
  EXPECT_TRUE(close(fused_g.to(Device::cpu()), gg.grad().to(Device::cpu()), 1e-4, 1e-5));
}

}  // namespace
}  // namespace tiny
