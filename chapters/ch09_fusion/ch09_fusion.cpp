// Chapter 09: fusion, arithmetic intensity, and the roofline.
//
// An op does two things: it moves bytes between memory and the arithmetic units, and it does
// arithmetic on them. Whichever takes longer sets its time. The first section fuses chains of
// elementwise ops into one pass and times what that saves. The rest of the chapter explains the
// saving with one number per op, its arithmetic intensity (FLOPs per byte moved), and one number
// per machine, its accelerator intensity (peak FLOP/s over bytes/s): below the machine's number
// an op waits on memory, above it on arithmetic. The datasheets give that number for three
// NVIDIA GPUs; for this CPU the program measures it. Then it times kernels on both sides of the
// line and writes the roofline figure's data.
//
//   make ch09 && ./ch09_fusion
//   ./ch09_fusion --csv build/csv && python3 plots/ch09_roofline.py build/csv docs/images
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tiny/tiny.h"

using namespace tiny;

// ---- what the sections share: the roofline figure's measured points -----------------------------
//
// Every kernel a section times becomes a point of the figure: its FLOPs over its bytes on the
// x axis, the FLOP/s it reached on the y axis. Each section writes its own points file,
// DIR/ch09_points_<part>.csv, with the columns below, and plots/ch09_roofline.py draws every
// ch09_points_*.csv it finds: a section adds points to the figure by writing its file, and no
// section has to run before another.

// One timed kernel.
struct TimedKernel {
  std::string name;
  double flops;    // the arithmetic it does
  double bytes;    // the bytes it must move at least: each input read once, the output written once
  double seconds;  // the median time of one call
  std::string device = "this CPU";  // a roof's name in ch09_roofs.csv
  double intensity() const { return flops / bytes; }
  double flop_per_sec() const { return flops / seconds; }
  double bytes_per_sec() const { return bytes / seconds; }
};

static void write_points(const std::string& dir, const std::string& part,
                         const std::vector<TimedKernel>& kernels) {
  CsvFile csv(dir, "ch09_points_" + part + ".csv",
              {"kernel", "device", "flops", "bytes", "seconds", "intensity", "flop_per_sec",
               "bytes_per_sec"});
  for (const TimedKernel& k : kernels)
    csv.row(k.name, k.device, k.flops, k.bytes, k.seconds, k.intensity(), k.flop_per_sec(),
            k.bytes_per_sec());
  std::printf("wrote %s\n", csv.path().c_str());
}

// ---- 1. fusion: eager chains against one compiled kernel (fusion.py) ----------------------------
//
// Eager execution runs each op as it is reached, so each op reads its inputs from memory and
// writes its result back. For `gelu(x) * g + b + x` on a 4096 x 4096 float32 array that is nine
// trips of 64 MiB: gelu reads x and writes t1, the multiply reads t1 and writes t2, the first add
// reads t2 and writes t3, the last add reads t3 and x and writes the result (g and b are one row
// each, broadcast down the columns, and cost next to nothing). A fused kernel reads x once and
// writes the result once: two trips.
//
// compile() fuses the way torch.compile does. The first call runs the function with a tracer
// listening to the dispatcher, and each op-table op becomes a node of a graph; the graph becomes
// one loop of generated C++, compiled by the compiler this library was built with and loaded with
// dlopen; later calls with the same shapes run that kernel without calling the function at all.

static Tensor gelu_scale_shift(const Tensor& x, const Tensor& g, const Tensor& b) {
  return gelu(x) * g + b + x;  // four elementwise ops: four passes, eagerly
}
static Tensor scale_shift(const Tensor& x, const Tensor& g, const Tensor& b) {
  return x * g + b + x;  // the same without GELU: three ops and almost no arithmetic
}

// What one call costs, as a CostCounter adds it up: each op's inputs read once and its output
// written once (a fused kernel is one op), and the op table's FLOPs.
static KernelCost counted_cost(const std::function<void()>& call) {
  const CostCounter counter;
  call();
  return {counter.flops(), counter.bytes()};
}

static double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The kernels live in a disk cache, so a second run of this program would find them compiled.
// To show what a first call costs every time, the chapter compiles into a fresh cache of its own.
struct FreshKernelCache {
  std::string dir;
  FreshKernelCache() {
    char name[] = "/tmp/ch09_kernels_XXXXXX";
    if (!mkdtemp(name)) throw RuntimeError("cannot create a temporary kernel cache");
    dir = name;
    setenv("TINY_FUSION_CACHE", dir.c_str(), 1);
  }
  ~FreshKernelCache() {
    unsetenv("TINY_FUSION_CACHE");
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

static void fusion_section(const std::optional<std::string>& csv_dir) {
  std::printf("== Fusion: eager chains against one compiled kernel, 4096 x 4096 float32 ==\n");
  const FreshKernelCache cache;
  Generator gen(0);
  const Tensor x = randn({4096, 4096}, kFloat32, gen);
  const Tensor g = randn({4096}, kFloat32, gen), b = randn({4096}, kFloat32, gen);
  struct Chain {
    const char* name;
    Tensor (*fn)(const Tensor&, const Tensor&, const Tensor&);
    int trials;  // timed calls of each form; the median is printed
  };
  const Chain chains[] = {{"GELU, scale, shift, add", gelu_scale_shift, 9},
                          {"scale, shift, add", scale_shift, 9}};
  std::vector<CompiledFunction> compiled;
  std::vector<TimedKernel> points;
  //! [fusion_timing]
  for (const Chain& c : chains) {
    const auto t0 = std::chrono::steady_clock::now();
    CompiledFunction fast = compile(c.fn);
    fast(x, g, b);  // the first call: trace (an eager call), generate, compile, load
    const double first_s = seconds_since(t0);
    const double eager_s = timed([&] { c.fn(x, g, b); }, c.trials);
    const double fused_s = timed([&] { fast(x, g, b); }, c.trials);
    const bool same = allclose(fast(x, g, b), c.fn(x, g, b), 1e-5, 1e-5);
    std::printf("%-24s eager %5.1f ms   compiled %4.1f ms (%.1fx)   first call %.1f s   "
                "same result: %s\n",
                c.name, eager_s * 1e3, fused_s * 1e3, eager_s / fused_s, first_s,
                same ? "True" : "False");
    const KernelCost eager = counted_cost([&] { c.fn(x, g, b); });
    points.push_back({std::string(c.name) + ", eager", eager.flops, eager.bytes, eager_s});
    points.push_back(
        {std::string(c.name) + ", compiled", fast.cost().flops, fast.cost().bytes, fused_s});
    compiled.push_back(fast);
  }
  //! [fusion_timing]
  const double clone_s = timed([&] { x.clone(); }, 9);
  std::printf("%-24s %5.1f ms  (x.clone(), the floor for any one-pass kernel)\n",
              "one read + one write", clone_s * 1e3);
  const double clone_bytes = 2.0 * static_cast<double>(x.nbytes());
  points.push_back({"x.clone()", 0, clone_bytes, clone_s});

  // The passes, counted rather than asserted: bytes moved over the bytes of x.
  std::printf("\nmemory traffic, in passes over x (%.0f MiB each; the rows of g and b add under 0.1%%):\n",
              static_cast<double>(x.nbytes()) / (1 << 20));
  const double x_bytes = static_cast<double>(x.nbytes());
  for (size_t i = 0; i < 2; ++i) {
    const Chain& c = chains[i];
    const double eager = counted_cost([&] { c.fn(x, g, b); }).bytes / x_bytes;
    std::printf("  %-24s eager %.1f   compiled %.1f\n", c.name, eager,
                compiled[i].cost().bytes / x_bytes);
  }
  std::printf("  %-24s %.1f\n", "x.clone()", clone_bytes / x_bytes);
  const double gelu_over_floor = points[1].seconds / clone_s;
  const double shift_over_floor = points[3].seconds / clone_s;
  std::printf(
      "the compiled scale-shift chain takes %.2f times the floor, the compiled GELU chain "
      "%.2f times:\n%s\n",
      shift_over_floor, gelu_over_floor,
      gelu_over_floor > 1.5 * shift_over_floor
          ? "without passes to remove, GELU's arithmetic (a polynomial an element) sets its time"
          : "both are bound by their two passes over memory");

  // What was captured and how it runs, and the fused kernel's intensity (the exercise).
  std::printf("\nwhat the tracer captured from gelu(x) * g + b + x, run as a %s:\n%s",
              compiled[0].backend().c_str(), compiled[0].graph().c_str());
  for (size_t i = 0; i < 2; ++i)
    std::printf("%s, compiled: %.3g FLOPs and %.3g bytes a call, %.3f FLOP/byte\n", chains[i].name,
                compiled[i].cost().flops, compiled[i].cost().bytes,
                compiled[i].cost().intensity());

  // A second compile of the same function finds the kernel in the disk cache.
  {
    const auto t0 = std::chrono::steady_clock::now();
    CompiledFunction again = compile(gelu_scale_shift);
    again(x, g, b);
    std::printf("compiled again by a new compile(): first call %.2f s (%s)\n", seconds_since(t0),
                again.stats().disk_cache_hits ? "its kernel came from the disk cache"
                                              : "compiled again");
  }

  // Signatures: a new shape recompiles; the old one is still cached.
  CompiledFunction& fast = compiled[1];
  const Tensor rows = x.slice(0, 0, 1024);
  fast(rows, g, b);
  fast(x, g, b);
  const CompileStats& s = fast.stats();
  std::printf("\nscale, shift, add after %lld calls (1024 rows once, 4096 rows the rest): "
              "compiles %lld, recompiles %lld, cache hits %lld\n",
              static_cast<long long>(s.calls), static_cast<long long>(s.compiles),
              static_cast<long long>(s.recompiles), static_cast<long long>(s.cache_hits));

  // A graph break: a matmul is not an elementwise op, so this function runs eagerly.
  auto with_matmul = compile([](const Tensor& a, const Tensor& w) { return relu(matmul(a, w)) + a; });
  const Tensor a = randn({8, 8}, kFloat32, gen), w = randn({8, 8}, kFloat32, gen);
  with_matmul(a, w);
  std::printf("relu(a @ w) + a: graph break, runs eagerly: %s\n",
              with_matmul.stats().last_break.c_str());

  // Autograd: one node for the whole chain, with a backward kernel of its own.
  Tensor xs = randn({64, 128}, kFloat32, gen).requires_grad_(true);
  Tensor gs = randn({128}, kFloat32, gen).requires_grad_(true);
  Tensor bs = randn({128}, kFloat32, gen).requires_grad_(true);
  CompiledFunction trained = compile(gelu_scale_shift);
  const Tensor y = trained(xs, gs, bs);
  y.sum().backward();
  const std::vector<Tensor> fused_grads = {xs.grad(), gs.grad(), bs.grad()};
  for (Tensor* t : {&xs, &gs, &bs}) t->set_grad(Tensor());
  gelu_scale_shift(xs, gs, bs).sum().backward();
  bool equal_grads = true;
  const std::vector<Tensor> eager_grads = {xs.grad(), gs.grad(), bs.grad()};
  for (size_t i = 0; i < 3; ++i)
    equal_grads = equal_grads && allclose(fused_grads[i], eager_grads[i], 1e-5, 1e-5);
  std::printf("on inputs that require grad: one node, %s; gradients equal eager's: %s\n",
              y.grad_fn()->name().c_str(), equal_grads ? "True" : "False");

  // The same on the GPU, when there is one: CUDA source compiled by NVRTC.
  if (!cuda::available()) {
    std::printf("on CUDA: skipped (%s)\n", cuda::unavailable_reason().c_str());
  } else {
    const Device gpu = Device::cuda(0);
    // The figure's roof for this GPU, if it has one (the three datasheets of section 3).
    const std::string gpu_name = cuda::device_name(0);
    std::string roof;
    for (const char* r : {"H100 SXM", "H200 SXM", "A100 SXM 80GB"})
      if (gpu_name.find(std::string(r).substr(0, 4)) != std::string::npos) roof = r;
    const Tensor xd = x.to(gpu), gd = g.to(gpu), bd = b.to(gpu);
    for (const Chain& c : chains) {
      const auto t0 = std::chrono::steady_clock::now();
      CompiledFunction fast_gpu = compile(c.fn);
      fast_gpu(xd, gd, bd);
      synchronize(gpu);
      const double first_s = seconds_since(t0);
      const double eager_s = timed([&] { c.fn(xd, gd, bd); }, gpu, 20);
      const double fused_s = timed([&] { fast_gpu(xd, gd, bd); }, gpu, 20);
      std::printf("on CUDA: %-24s eager %5.2f ms   compiled %5.2f ms (%.1fx)   first call %.2f s\n",
                  c.name, eager_s * 1e3, fused_s * 1e3, eager_s / fused_s, first_s);
      if (!roof.empty())
        points.push_back({std::string(c.name) + ", compiled", fast_gpu.cost().flops,
                          fast_gpu.cost().bytes, fused_s, roof});
    }
    const double clone_gpu = timed([&] { xd.clone(); }, gpu, 20);
    std::printf("on CUDA: %-24s %5.2f ms  (%.0f GB/s)\n", "x.clone()", clone_gpu * 1e3,
                clone_bytes / clone_gpu / 1e9);
  }
  if (csv_dir) write_points(*csv_dir, "fusion", points);
  std::printf("\n");
}

// ---- 2. where an op's time goes: ReLU on an H100 ------------------------------------------------

// The FLOPs and bytes of an op, counted as seed document 004's table counts them: every input
// read once and every output written once, `size` bytes an element.
struct Cost {
  double flops, bytes;
  double intensity() const { return flops / bytes; }
};

// n elements in, n out, `per_element` FLOPs each.
static Cost elementwise_cost(double n, double per_element, double size) {
  return {per_element * n, size * (n + n)};
}

// (B, D) @ (D, K): each of the B K outputs is a sum of D products, D multiplies and D - 1 adds.
// (flops.h's matmul_flops, the napkin rule, counts 2 B D K, an add for every multiply: 1/(2D)
// more, 0.2% or less at the sizes here.) A dot product is (1, n) @ (n, 1), a matrix-vector
// product (n, n) @ (n, 1).
static Cost matmul_cost(double B, double D, double K, double size) {
  return {B * K * (2 * D - 1), size * (B * D + D * K + B * K)};
}

static void relu_on_an_h100() {
  std::printf("== Where the time goes: ReLU on 1024 x 1024 bfloat16 numbers, on an H100 SXM ==\n");
  //! [relu_times]
  const double flop_per_sec = promised_flop_per_sec("H100", kBFloat16);  // 989.5e12, dense
  const double bytes_per_sec = promised_bytes_per_sec("H100");           // 3.35e12
  const double n = 1024.0 * 1024.0;
  // Read x and write y, 2 bytes an element each way: 4n bytes; one max(x, 0) an element: n FLOPs.
  const Cost relu = elementwise_cost(n, 1, /*size=*/2);
  const double moving = relu.bytes / bytes_per_sec, computing = relu.flops / flop_per_sec;
  std::printf("n = %s elements: %s bytes to move (4n), %s FLOPs to do (n)\n",
              with_commas(int64_t(n)).c_str(), with_commas(int64_t(relu.bytes)).c_str(),
              with_commas(int64_t(relu.flops)).c_str());
  std::printf("moving them:   4n / %.3g B/s     = %.2e s\n", bytes_per_sec, moving);
  std::printf("computing:      n / %.4g FLOP/s = %.2e s\n", flop_per_sec, computing);
  //! [relu_times]
  std::printf("the bytes take %.0f times as long as the arithmetic: ReLU is memory-bound\n",
              moving / computing);
  std::printf("with loads and arithmetic overlapped, the op takes max(%.2e, %.2e) = %.2e s\n",
              moving, computing, std::max(moving, computing));
  // The document's two numbers are these with every digit after the second dropped.
  std::printf("(seed document 004 writes 1.2e-6 and 1.0e-9: the same quotients cut off after two "
              "significant figures; rounded they are %.1e and %.1e)\n\n",
              moving, computing);
}

// ---- 3. accelerator intensity: what a machine can do per byte it moves --------------------------

// A machine's roof: its peak FLOP/s, the bytes/s its memory delivers, and where the numbers
// come from.
struct Roof {
  std::string name;
  double flop_per_sec, bytes_per_sec;
  std::string source;
  // The accelerator intensity: an op needs this many FLOPs per byte to keep the arithmetic busy.
  double intensity() const { return flop_per_sec / bytes_per_sec; }
  // The most FLOP/s an op of `intensity` can reach here: the roofline itself.
  double attainable(double op_intensity) const {
    return std::min(flop_per_sec, op_intensity * bytes_per_sec);
  }
};

// A datasheet's roof: dense bfloat16 matmul FLOP/s and HBM bandwidth (tiny/flops.h keeps both).
static Roof promised_roof(const std::string& device, const std::string& name) {
  return {name, promised_flop_per_sec(device, kBFloat16), promised_bytes_per_sec(device),
          "datasheet: bfloat16 dense, HBM"};
}

// This CPU's roof, measured: the FLOP/s of a large float32 matmul (the library's, through
// OpenBLAS where the build found it), where a BLAS comes closest to the cores' peak, and the
// bytes/s of cloning a 64 MiB tensor, which reads each byte once and writes it once and does no
// arithmetic at all.
static Roof measure_this_cpu() {
  //! [cpu_roof]
  const int64_t n = 2048;
  const Tensor a = randn({n, n}), b = randn({n, n});
  const double matmul_seconds = timed([&] { (void)matmul(a, b); }, 5);
  const Tensor x = randn({4096, 4096});  // 64 MiB of float32
  const double clone_seconds = timed([&] { (void)x.clone(); }, 5);
  const Roof cpu{"this CPU", matmul_cost(n, n, n, 4).flops / matmul_seconds,
                 2.0 * double(x.nbytes()) / clone_seconds, "measured: float32 matmul and clone"};
  //! [cpu_roof]
  return cpu;
}

// A rate with the prefix that suits it: 989.5 TFLOP/s, 60.85 GFLOP/s, 3.35 TB/s.
static std::string per_second(double value, const char* unit) {
  const char* prefix = value >= 1e12 ? "T" : value >= 1e9 ? "G" : "M";
  const double scale = value >= 1e12 ? 1e12 : value >= 1e9 ? 1e9 : 1e6;
  return strprintf("%.4g %s%s/s", value / scale, prefix, unit);
}

static std::vector<Roof> accelerator_intensities() {
  std::printf("== Accelerator intensity: peak FLOP/s over memory bytes/s ==\n");
  //! [accelerators]
  const std::vector<Roof> roofs = {promised_roof("H100", "H100 SXM"),
                                   promised_roof("H200", "H200 SXM"),
                                   promised_roof("A100", "A100 SXM 80GB"), measure_this_cpu()};
  std::printf("device          peak            memory       FLOP per byte   numbers\n");
  for (const Roof& r : roofs)
    std::printf("%-15s %-15s %-12s %13.2f   %s\n", r.name.c_str(),
                per_second(r.flop_per_sec, "FLOP").c_str(),
                per_second(r.bytes_per_sec, "B").c_str(), r.intensity(), r.source.c_str());
  //! [accelerators]
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");  // Haswell halves sgemm on AVX-512
  std::printf("this CPU's peak: a 2048 x 2048 float32 matmul (%s%s%s)\n",
              matmul_backend_description().c_str(), coretype ? ", OPENBLAS_CORETYPE=" : "",
              coretype ? coretype : "");
  std::printf("this CPU's memory: cloning a 64 MiB float32 tensor, which reads each byte once and "
              "writes it once\n");
  std::printf("an op with fewer FLOPs per byte than its machine's number waits on memory; one "
              "with more waits on arithmetic\n\n");
  return roofs;
}

// ---- 4. arithmetic intensity: what an op does per byte it moves ---------------------------------

// The five ops of the table, for n (elements, or the side of the matrix) and element size.
struct Op {
  const char* name;
  const char* flops;    // the formula, as the table prints it
  const char* bytes;    // in bfloat16
  const char* large_n;  // what the intensity tends to as n grows
  Cost (*cost)(double n, double size);
};
// GeLU's 20 FLOPs an element is the document's estimate for the tanh form (a cube, a tanh and a
// handful of multiplies and adds). The op table (tiny/op_table.h) counts one FLOP for any
// elementwise function, gelu included, since what an erf or a tanh costs depends on how it is
// computed; the table here keeps the document's count.
static const std::vector<Op> kOps = {
    {"ReLU", "n", "4n", "1/4", [](double n, double s) { return elementwise_cost(n, 1, s); }},
    {"GeLU", "20n", "4n", "5", [](double n, double s) { return elementwise_cost(n, 20, s); }},
    {"dot product", "2n-1", "4n+2", "1/2",
     [](double n, double s) { return matmul_cost(1, n, 1, s); }},
    {"matrix-vector", "n(2n-1)", "2n^2+4n", "1",
     [](double n, double s) { return matmul_cost(n, n, 1, s); }},
    {"matrix-matrix", "n^2(2n-1)", "6n^2", "n/3",
     [](double n, double s) { return matmul_cost(n, n, n, s); }},
};

static void arithmetic_intensities(const Roof& h100) {
  std::printf("== Arithmetic intensity of five ops: FLOPs per byte, in bfloat16, n = 1024 ==\n");
  //! [intensity]
  const double n = 1024, bf16 = 2;
  std::printf("op              FLOPs       bytes      FLOP/byte   as n grows      on an H100 "
              "(%.2f)\n",
              h100.intensity());
  for (const Op& op : kOps) {
    const Cost c = op.cost(n, bf16);
    const std::string limit = std::string(op.large_n) == "n/3" ? strprintf("n/3 = %.2f", n / 3)
                                                                : std::string(op.large_n);
    std::printf("%-15s %-11s %-10s %9.2f   %-15s %s-bound\n", op.name, op.flops, op.bytes,
                c.intensity(), limit.c_str(),
                c.intensity() < h100.intensity() ? "memory" : "compute");
  }
  //! [intensity]
  std::printf("GeLU does 20 times ReLU's arithmetic on the same bytes, and both are far below "
              "%.0f: on an H100 both take the time of their bytes\n",
              h100.intensity());
  std::printf("a matrix product moves 3n^2 numbers and does about 2n^3 FLOPs: its intensity "
              "grows with n, the others' do not\n\n");
}

// ---- 5. MFU from the roofline; training against inference ---------------------------------------

static void model_flops_utilization(const std::vector<Roof>& roofs) {
  std::printf("== MFU = min(1, arithmetic intensity / accelerator intensity), n = 1024 ==\n");
  //! [mfu]
  std::printf("op              FLOP/byte");
  for (const Roof& r : roofs) std::printf(" %13s", r.name.c_str());
  std::printf("\n");
  for (const Op& op : kOps) {
    std::printf("%-15s %9.2f", op.name, op.cost(1024, 2).intensity());
    for (const Roof& r : roofs) {
      // The GPUs' roofs are bfloat16's; this CPU's was measured in float32, 4 bytes an element.
      const double size = r.name == "this CPU" ? 4 : 2;
      const double mfu = std::min(1.0, op.cost(1024, size).intensity() / r.intensity());
      std::printf(" %12.2f%%", 100 * mfu);
    }
    std::printf("\n");
  }
  //! [mfu]
  std::printf("(this CPU's column counts float32 bytes, in which every intensity is half the "
              "bfloat16 one)\n");
  std::printf("an op below its machine's intensity can keep at most that share of the arithmetic "
              "busy\n");

  // One layer of a model, a d x d bfloat16 weight. Training (and reading a prompt) multiplies
  // it by every token of a sequence at once, a matrix-matrix product; generating text
  // multiplies it by one token at a time, a matrix-vector product.
  //! [training_inference]
  const double d = 4096, tokens = 2048;
  const Roof& h100 = roofs.front();
  const Cost training = matmul_cost(tokens, d, d, 2), inference = matmul_cost(1, d, d, 2);
  std::printf("one layer, a %.0f x %.0f bfloat16 weight, on an H100 SXM:\n", d, d);
  std::printf("  training, %.0f tokens at once:  %8.2f FLOP/byte, MFU at most %6.2f%%\n", tokens,
              training.intensity(), 100 * std::min(1.0, training.intensity() / h100.intensity()));
  std::printf("  inference, one token at a time: %8.2f FLOP/byte, MFU at most %6.2f%%\n",
              inference.intensity(),
              100 * std::min(1.0, inference.intensity() / h100.intensity()));
  // The fewest tokens per product that reach the H100's intensity: a batch of requests served
  // together multiplies the weight by that many tokens at once.
  double batch = 1;
  while (matmul_cost(batch, d, d, 2).intensity() < h100.intensity()) ++batch;
  std::printf("  the product becomes compute-bound at %.0f tokens at once (%.2f FLOP/byte)\n",
              batch, matmul_cost(batch, d, d, 2).intensity());
  //! [training_inference]
  std::printf("\n");
}

// ---- 6. measured here: both sides of this CPU's roof --------------------------------------------

// Median seconds of `fn` over `trials` calls, as a point of the figure.
static TimedKernel time_kernel(const std::string& name, Cost cost,
                               const std::function<void()>& fn, int trials) {
  return {name, cost.flops, cost.bytes, timed(fn, trials)};
}

static std::vector<TimedKernel> measured_here(const Roof& cpu) {
  std::printf("== Measured on this CPU: float32 kernels against its roof (%.1f GFLOP/s, %.1f "
              "GB/s, %.1f FLOP/byte) ==\n",
              cpu.flop_per_sec / 1e9, cpu.bytes_per_sec / 1e9, cpu.intensity());
  //! [measured]
  const double f32 = 4;
  const int64_t side = 4096;  // 4096 x 4096 float32: 64 MiB, far more than any cache here
  const double n = double(side) * double(side);
  const Tensor x = randn({side, side}), v = randn({side});
  const Tensor a256 = randn({256, 256}), a1024 = randn({1024, 1024});
  const std::vector<TimedKernel> kernels = {
      time_kernel("x.clone()", {0, f32 * 2 * n}, [&] { (void)x.clone(); }, 5),
      time_kernel("relu(x)", elementwise_cost(n, 1, f32), [&] { (void)relu(x); }, 5),
      time_kernel("gelu(x)", elementwise_cost(n, 20, f32), [&] { (void)gelu(x); }, 3),
      time_kernel("x @ v (4096)", matmul_cost(side, side, 1, f32), [&] { (void)matmul(x, v); }, 5),
      time_kernel("matmul (256)", matmul_cost(256, 256, 256, f32),
                  [&] { (void)matmul(a256, a256); }, 20),
      time_kernel("matmul (1024)", matmul_cost(1024, 1024, 1024, f32),
                  [&] { (void)matmul(a1024, a1024); }, 5),
  };
  std::printf("kernel          FLOP/byte      time     GFLOP/s     GB/s   of the roof   "
              "the roofline says\n");
  for (const TimedKernel& k : kernels) {
    const double roof = cpu.attainable(k.intensity());  // 0 for the copy, which does no FLOPs
    std::printf("%-15s %9.3f %7.2f ms %9.2f %8.2f %11s   %s\n", k.name.c_str(), k.intensity(),
                k.seconds * 1e3, k.flop_per_sec() / 1e9, k.bytes_per_sec() / 1e9,
                roof > 0 ? strprintf("%.0f%%", 100 * k.flop_per_sec() / roof).c_str() : "-",
                k.flops == 0                      ? "memory-bound (the copy)"
                : k.intensity() < cpu.intensity() ? "memory-bound"
                                                  : "compute-bound");
  }
  //! [measured]
  return kernels;
}

// An elementwise kernel reads and writes as many bytes as a copy of its input, so a copy's speed
// is what it can hope for. At half that speed or better, memory sets its time; well below it,
// something else does: its arithmetic, or the way its loop is written.
static const char* elementwise_verdict(const TimedKernel& k, const TimedKernel& copy) {
  return k.bytes_per_sec() >= 0.5 * copy.bytes_per_sec()
             ? "memory-bound: its bytes set its time"
             : "not memory-bound: its arithmetic, not its bytes, sets its time here";
}

// What the measurements say. The words are chosen by the numbers, since they are this machine's
// (the README discusses both cases).
static void what_the_measurements_say(const std::vector<TimedKernel>& k, const Roof& cpu) {
  const TimedKernel &copy = k[0], &relu_k = k[1], &gelu_k = k[2], &mv = k[3], &mm = k[5];
  //! [verdicts]
  for (const TimedKernel* e : {&relu_k, &gelu_k})
    std::printf("%s moves its bytes at %.0f%% of the copy's speed: %s\n", e->name.c_str(),
                100 * e->bytes_per_sec() / copy.bytes_per_sec(), elementwise_verdict(*e, copy));
  std::printf("gelu(x) takes %.1f times relu(x)'s time; where both were memory-bound it would "
              "take about the same\n",
              gelu_k.seconds / relu_k.seconds);
  std::printf("x @ v reaches %.1f%% of the peak FLOP/s and matmul (1024) %.0f%%: the first "
              "waits on its matrix's bytes, the second on its arithmetic\n",
              100 * mv.flop_per_sec() / cpu.flop_per_sec,
              100 * mm.flop_per_sec() / cpu.flop_per_sec);
  //! [verdicts]
  std::printf("\n");
}

// ---- 7. the figure: every roof and every measured point -----------------------------------------

static void write_figure_data(const std::string& dir, const std::vector<Roof>& roofs,
                              const std::vector<TimedKernel>& kernels) {
  CsvFile csv(dir, "ch09_roofs.csv",
              {"device", "flop_per_sec", "bytes_per_sec", "intensity", "source"});
  for (const Roof& r : roofs)
    csv.row(r.name, r.flop_per_sec, r.bytes_per_sec, r.intensity(), r.source);
  std::printf("wrote %s\n", csv.path().c_str());
  write_points(dir, "measured", kernels);
}

int main(int argc, char** argv) {
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    fusion_section(csv_dir);
    relu_on_an_h100();
    const std::vector<Roof> roofs = accelerator_intensities();
    arithmetic_intensities(roofs.front());
    model_flops_utilization(roofs);
    const std::vector<TimedKernel> kernels = measured_here(roofs.back());
    what_the_measurements_say(kernels, roofs.back());
    if (csv_dir) write_figure_data(*csv_dir, roofs, kernels);
  });
}
