// cuda_jit_test.cpp: the run-time compilation layer of chapter 09's fused kernels
// (fusion/cuda_jit.h), in the three situations a machine can be in:
//   - built without CUDA: nothing compiles or loads, and every call says why;
//   - built with CUDA but without a driver or GPU (a laptop with the toolkit, CI): NVRTC is a
//     compiler that needs neither, so compiling is checked here in full, and loading says that
//     the driver is missing;
//   - with a GPU: a compiled kernel is loaded, launched on device tensors, and must give what
//     the CPU computes.
// Each test that cannot run where it is skips and says why.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "fusion/cuda_jit.h"
#include "test_util.h"
#include "tiny/tiny.h"

using namespace tiny;
using namespace tiny::testing;
namespace jit = tiny::detail::jit;

#define TINY_REQUIRE_NVRTC() \
  if (!jit::nvrtc_available()) GTEST_SKIP() << "the library was built without CUDA"
#define TINY_REQUIRE_CUDA() \
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason()

namespace {

// The kind of kernel the fusion pass writes: extern "C" (so its name is not mangled and the
// driver finds it by name), one thread per element, and a math-library call.
const char* const kSampleName = "scale_add_erf";
const char* const kSample = R"(
extern "C" __global__ void scale_add_erf(float* out, const float* x, const float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = x[i] * 2.0f + erff(y[i]);
}
)";

}  // namespace

// ---- a build without CUDA ----------------------------------------------------------------------

TEST(CudaJitAbsent, EveryCallSaysTheBuildHasNoCuda) {
  if (jit::nvrtc_available()) GTEST_SKIP() << "the library was built with CUDA";
  EXPECT_FALSE(jit::driver_available());
  const std::string why = "the library was built without CUDA";
  EXPECT_TRUE(throws_with<RuntimeError>([] { jit::nvrtc_compile(kSample, "k.cu", 90); }, why));
  EXPECT_TRUE(throws_with<RuntimeError>([] { jit::current_device_arch(); }, why));
  EXPECT_TRUE(throws_with<RuntimeError>([] { jit::load_kernel("", kSampleName); }, why));
  EXPECT_TRUE(throws_with<RuntimeError>([] { jit::launch({}, 1, 1, nullptr); }, why));
}

// ---- compiling: needs the CUDA build, not a GPU ------------------------------------------------

TEST(CudaJitCompile, SampleKernelBecomesPtx) {
  TINY_REQUIRE_NVRTC();
  // The compile time is what a fused kernel costs the first time its graph is seen (the caller
  // caches the result), so it is reported; it is not asserted, machines differ too much. The
  // first compile of a process also loads NVRTC's built-in headers, so a second is timed too.
  std::string ptx;
  double ms[2] = {};
  for (double& t : ms) {
    const auto start = std::chrono::steady_clock::now();
    ptx = jit::nvrtc_compile(kSample, "scale_add_erf.cu", 90);
    t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::printf("NVRTC compiled %s in %.1f ms (first in this process), then %.1f ms\n",
              kSampleName, ms[0], ms[1]);
  RecordProperty("nvrtc_compile_ms", std::to_string(ms[1]));
  EXPECT_NE(ptx.find(".entry"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(std::string(".entry ") + kSampleName), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos) << ptx;
  // erff is inlined from libdevice (there are no calls left to resolve at load time), and the
  // text is plain PTX, without the terminating NUL NVRTC counts in its size.
  EXPECT_EQ(ptx.find("erff"), std::string::npos);
  EXPECT_EQ(ptx.find('\0'), std::string::npos);
}

TEST(CudaJitCompile, IeeeMathNotFastMath) {
  TINY_REQUIRE_NVRTC();
  // With --use_fast_math, x / y becomes an approximate division (div.approx.f32) and denormals
  // are flushed (.ftz); without it the division is the correctly rounded div.rn.f32.
  const std::string ptx = jit::nvrtc_compile(
      R"(extern "C" __global__ void divide(float* out, const float* x, const float* y) {
           out[threadIdx.x] = x[threadIdx.x] / y[threadIdx.x];
         })",
      "divide.cu", 90);
  EXPECT_NE(ptx.find("div.rn.f32"), std::string::npos) << ptx;
  EXPECT_EQ(ptx.find("div.approx"), std::string::npos) << ptx;
  EXPECT_EQ(ptx.find(".ftz"), std::string::npos) << ptx;
}

TEST(CudaJitCompile, CompileErrorCarriesNvrtcLog) {
  TINY_REQUIRE_NVRTC();
  const std::string bad = "extern \"C\" __global__ void broken(float* out) {\n"
                          "  out[0] = 1\n"
                          "}\n";
  // NVRTC's own log line (file name, line, message), and the source numbered as the log counts.
  EXPECT_TRUE(throws_with<RuntimeError>([&] { jit::nvrtc_compile(bad, "broken.cu", 90); },
                                        "broken.cu(3): error: expected a \";\""));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { jit::nvrtc_compile(bad, "broken.cu", 90); },
                                        "CUDA NVRTC error: broken.cu did not compile"));
  EXPECT_TRUE(throws_with<RuntimeError>([&] { jit::nvrtc_compile(bad, "broken.cu", 90); },
                                        "   2    out[0] = 1\n"));
  // No include path is passed, so a kernel must be self-contained: NVRTC has only its built-in
  // headers, and the toolkit's (cuda_fp16.h among them) may not exist where the program runs.
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { jit::nvrtc_compile("#include <cuda_fp16.h>\n", "half.cu", 90); },
      "half.cu(1): catastrophic error: could not open source file \"cuda_fp16.h\""));
}

TEST(CudaJitCompile, DefaultDeviceAndCpp17) {
  TINY_REQUIRE_NVRTC();
  // A helper without __device__ compiles as device code (-default-device), and C++17's
  // if constexpr is accepted (--std=c++17).
  const std::string ptx = jit::nvrtc_compile(
      R"(template <int N> float times(float v) { if constexpr (N == 2) return v + v; else return v * N; }
         extern "C" __global__ void twice(float* out) { out[threadIdx.x] = times<2>(out[threadIdx.x]); })",
      "twice.cu", 90);
  EXPECT_NE(ptx.find(".entry twice"), std::string::npos) << ptx;
}

TEST(CudaJitCompile, ArchitectureChoice) {
  TINY_REQUIRE_NVRTC();
  // An older GPU gets PTX for its own architecture.
  EXPECT_NE(jit::nvrtc_compile(kSample, "k.cu", 80).find(".target sm_80"), std::string::npos);
  // A GPU newer than this NVRTC knows gets PTX for the newest architecture it does know, which
  // the driver compiles forward; so does an architecture it skips (sm_91 does not exist).
  const std::string future = jit::nvrtc_compile(kSample, "k.cu", 990);
  EXPECT_NE(future.find(".target sm_"), std::string::npos) << future;
  EXPECT_NE(jit::nvrtc_compile(kSample, "k.cu", 91).find(".target sm_90"), std::string::npos);
  // An architecture older than every one it supports cannot work at all.
  EXPECT_TRUE(throws_with<RuntimeError>([] { jit::nvrtc_compile(kSample, "k.cu", 20); },
                                        "cannot compile for sm_20 (it supports sm_"));
}

// ---- loading and launching: need a driver, and a GPU --------------------------------------------

TEST(CudaJitNoDriver, LoadSaysTheDriverIsMissing) {
  TINY_REQUIRE_NVRTC();
  if (jit::driver_available()) GTEST_SKIP() << "a CUDA driver is present";
  const std::string ptx = jit::nvrtc_compile(kSample, "k.cu", 90);
  EXPECT_TRUE(throws_with<RuntimeError>([&] { jit::load_kernel(ptx, kSampleName); },
                                        "load_kernel: the CUDA driver library libcuda.so.1"));
  // The library itself keeps working without the driver (it started, it compiled).
  EXPECT_TRUE(equal(ones({3}) + ones({3}), full({3}, 2.0)));
}

TEST(CudaJitNoDriver, NoDeviceToAsk) {
  TINY_REQUIRE_NVRTC();
  if (cuda::available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_TRUE(throws_with<RuntimeError>([] { jit::current_device_arch(); },
                                        "current_device_arch: CUDA is not available"));
}

TEST(CudaJitLaunch, AnUnloadedKernelIsRefused) {
  TINY_REQUIRE_NVRTC();
  jit::CudaKernel k;
  k.name = "never_loaded";
  EXPECT_TRUE(throws_with<RuntimeError>([&] { jit::launch(k, 1, 1, nullptr); },
                                        "the kernel never_loaded is not loaded"));
}

TEST(CudaJitGpu, CompiledKernelMatchesCpu) {
  TINY_REQUIRE_CUDA();
  const int arch = jit::current_device_arch();
  const cuda::DeviceProperties props = cuda::get_device_properties(0);
  EXPECT_EQ(arch, props.major * 10 + props.minor);
  const jit::CudaKernel k =
      jit::load_kernel(jit::nvrtc_compile(kSample, "scale_add_erf.cu", arch), kSampleName);
  EXPECT_EQ(k.device, 0);
  EXPECT_EQ(k.name, kSampleName);
  TINY_SEEDED(rng);
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{1000}, int64_t{100003}}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const Tensor x = random_values(rng, {n}).to(kFloat32);
    const Tensor y = random_values(rng, {n}).to(kFloat32);
    // y reaches the GPU as the result of an op queued just before the launch, and the output
    // is read back by a copy queued just after, with no synchronisation in between: the launch
    // is ordered with both only if it runs on the backend's stream.
    const Tensor x_gpu = x.cuda();
    const Tensor y_gpu = (y.cuda() * 3.0) / 3.0;
    const Tensor y_used = y_gpu.cpu();
    const Tensor out = empty({n}, kFloat32, Device::cuda(0));
    void* out_ptr = out.data_ptr();
    const void* x_ptr = x_gpu.data_ptr();
    const void* y_ptr = y_gpu.data_ptr();
    long long count = n;
    void* args[] = {&out_ptr, &x_ptr, &y_ptr, &count};
    const unsigned block = 256;
    jit::launch(k, static_cast<unsigned>((n + block - 1) / block), block, args);
    const Tensor got = out.cpu();
    // CUDA's erff is within 2 units in the last place of the exact value; x * 2 is exact.
    const float* g = got.data<float>();
    const float* xs = x.data<float>();
    const float* ys = y_used.data<float>();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = 2.0 * xs[i] + std::erf(static_cast<double>(ys[i]));
      const double tolerance = 4 * std::numeric_limits<float>::epsilon() * (std::abs(want) + 1);
      if (std::abs(g[i] - want) > tolerance && bad++ < 5)
        ADD_FAILURE() << "element " << i << ": " << g[i] << " vs " << want;
    }
    EXPECT_EQ(bad, 0);
  }
  // An empty tensor is a grid of no blocks, which launches nothing.
  EXPECT_NO_THROW(jit::launch(k, 0, 256, nullptr));
}

TEST(CudaJitGpu, LoadAndLaunchErrorsAreClear) {
  TINY_REQUIRE_CUDA();
  const std::string ptx =
      jit::nvrtc_compile(kSample, "scale_add_erf.cu", jit::current_device_arch());
  EXPECT_TRUE(throws_with<RuntimeError>([&] { jit::load_kernel(ptx, "scale_add"); },
                                        "the PTX has no kernel of that name"));
  EXPECT_TRUE(throws_with<RuntimeError>(
      [] { jit::load_kernel("this is not PTX", kSampleName); },
      "CUDA driver error: "));
  const jit::CudaKernel k = jit::load_kernel(ptx, kSampleName);
  // More threads per block than any GPU has.
  EXPECT_TRUE(throws_with<RuntimeError>([&] { jit::launch(k, 1, 4096, nullptr); },
                                        "in cuLaunchKernel(scale_add_erf, grid 1, block 4096)"));
  // The failed launch left no error behind for the library's next op.
  EXPECT_TRUE(equal((ones({4}, kFloat32, Device::cuda(0)) * 2.0).cpu(), full({4}, 2.0)));
}
