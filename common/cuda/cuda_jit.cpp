// cuda_jit.cpp: the run-time compilation layer of fusion/cuda_jit.h, for builds with CUDA.
//
// Three libraries take part, each for one step:
//   - NVRTC (linked in, see CMakeLists.txt) compiles the generated CUDA C++ to PTX. It is a
//     compiler and nothing more: it runs without a GPU or a driver, so a CPU-only machine with
//     the toolkit can compile (and the tests check) every kernel.
//   - The CUDA driver API loads PTX into a context and launches kernels from it. The library
//     never links libcuda: it is opened with dlopen on first use, so every binary still starts
//     on a machine without a driver, as the rest of the CUDA backend (cudart_static) does.
//   - The CUDA runtime, which every other op of the backend uses, owns the context. The driver
//     calls here run in the context the runtime has made current (the device's primary context),
//     so device pointers from the library's allocator are valid in the kernels and the kernels
//     run on the same stream as everything else.
#include "../src/fusion/cuda_jit.h"

// <cuda.h> only for the driver's types and constants (CUresult, CUmodule, CU_JIT_...); no
// driver function is called through its declarations, so nothing needs libcuda at link time.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "cuda_check.h"
#include "tiny/device.h"
#include "tiny/error.h"

namespace tiny::detail::jit {
namespace {

// ---- NVRTC -------------------------------------------------------------------------------------

void check_nvrtc(nvrtcResult result, const char* call) {
  if (result != NVRTC_SUCCESS)
    throw RuntimeError(std::string("CUDA NVRTC error: ") + nvrtcGetErrorString(result) + " in " +
                       call);
}

// Destroys the program on every way out of nvrtc_compile, the error paths included.
class Program {
 public:
  Program(const std::string& source, const std::string& name) {
    check_nvrtc(nvrtcCreateProgram(&program_, source.c_str(), name.c_str(), 0, nullptr, nullptr),
                "nvrtcCreateProgram");
  }
  ~Program() { nvrtcDestroyProgram(&program_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return program_; }

  std::string log() const {
    size_t size = 0;
    check_nvrtc(nvrtcGetProgramLogSize(program_, &size), "nvrtcGetProgramLogSize");
    std::string text(size, '\0');
    check_nvrtc(nvrtcGetProgramLog(program_, text.data()), "nvrtcGetProgramLog");
    text.resize(std::strlen(text.c_str()));  // the size counts the terminating NUL
    return text;
  }

 private:
  nvrtcProgram program_ = nullptr;
};

// The architectures this NVRTC can write PTX for, in increasing order (asked once: it is a
// property of the library, not of the machine).
const std::vector<int>& supported_archs() {
  static const std::vector<int> archs = [] {
    int n = 0;
    check_nvrtc(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
    std::vector<int> list(static_cast<size_t>(n));
    if (n > 0) check_nvrtc(nvrtcGetSupportedArchs(list.data()), "nvrtcGetSupportedArchs");
    std::sort(list.begin(), list.end());
    return list;
  }();
  return archs;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

// The architecture to write PTX for: `arch` itself when NVRTC knows it, otherwise the newest one
// below it. PTX for an older architecture runs on every newer GPU (the driver compiles it for
// the GPU when it loads), which is how a toolkit older than the GPU still works.
int ptx_arch(int arch) {
  const std::vector<int>& archs = supported_archs();
  int chosen = 0;
  for (int a : archs)
    if (a <= arch) chosen = a;
  if (chosen == 0) {
    std::string known = archs.empty() ? "none" : "sm_" + std::to_string(archs.front()) +
                                                     " to sm_" + std::to_string(archs.back());
    throw RuntimeError("nvrtc_compile: NVRTC " + nvrtc_version() +
                       " cannot compile for sm_" + std::to_string(arch) +
                       " (it supports " + known + ")");
  }
  return chosen;
}

// The source with line numbers, as NVRTC's log counts them ("name(12): error: ..."), so the line
// a message points at can be found in a generated kernel nobody has seen as a file.
std::string numbered(const std::string& source) {
  std::string out;
  size_t line = 1, start = 0;
  while (start < source.size()) {
    size_t end = source.find('\n', start);
    if (end == std::string::npos) end = source.size();
    std::string number = std::to_string(line++);
    out += std::string(number.size() < 4 ? 4 - number.size() : 0, ' ') + number + "  " +
           source.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// ---- the driver, opened at run time ------------------------------------------------------------

// The driver entry points this file uses, looked up by name in libcuda.so.1. The plain names are
// the ABI versions whose null stream is the legacy default stream (the "_ptsz" variants would
// use a per-thread stream instead), the one the runtime's stream 0 is, see launch().
struct Driver {
  std::string error;  // why the driver cannot be used; empty when it can
  int version = 0;    // cuDriverGetVersion: 13000 for CUDA 13.0
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  CUresult (*ctx_get_current)(CUcontext*) = nullptr;
  CUresult (*module_load_data_ex)(CUmodule*, const void*, unsigned int, CUjit_option*,
                                  void**) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                            unsigned int, unsigned int, unsigned int, CUstream, void**,
                            void**) = nullptr;
};

template <typename F> bool find_symbol(void* library, const char* name, F& slot, Driver& d) {
  slot = reinterpret_cast<F>(dlsym(library, name));
  if (!slot) d.error = std::string("libcuda.so.1 has no ") + name + " (the CUDA driver is too old)";
  return slot != nullptr;
}

Driver open_driver() {
  Driver d;
  // The runtime (cudart_static) opens the same library when it starts, so once it has, this
  // returns the copy already loaded: one driver, one set of contexts, in the process. The
  // handle is never closed; the runtime keeps using the library until the process exits.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    d.error = std::string("the CUDA driver library libcuda.so.1 could not be opened (") +
              (why ? why : "unknown reason") + "): is an NVIDIA driver installed?";
    return d;
  }
  if (!find_symbol(library, "cuInit", d.init, d) ||
      !find_symbol(library, "cuDriverGetVersion", d.driver_get_version, d) ||
      !find_symbol(library, "cuGetErrorName", d.get_error_name, d) ||
      !find_symbol(library, "cuGetErrorString", d.get_error_string, d) ||
      !find_symbol(library, "cuCtxGetCurrent", d.ctx_get_current, d) ||
      !find_symbol(library, "cuModuleLoadDataEx", d.module_load_data_ex, d) ||
      !find_symbol(library, "cuModuleGetFunction", d.module_get_function, d) ||
      !find_symbol(library, "cuModuleUnload", d.module_unload, d) ||
      !find_symbol(library, "cuLaunchKernel", d.launch_kernel, d))
    return d;
  // cuInit must precede every other driver call; it is cheap and idempotent, and the runtime
  // has usually called it already.
  if (const CUresult r = d.init(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.get_error_name(r, &name);
    d.error = std::string("the CUDA driver did not initialise: cuInit failed with ") +
              (name ? name : std::to_string(static_cast<int>(r)));
    return d;
  }
  d.driver_get_version(&d.version);
  return d;
}

const Driver& driver_state() {
  static const Driver d = open_driver();
  return d;
}

// The driver, or a RuntimeError that says why there is none. A driver alone is not enough: the
// runtime must also see a device (a driver older than the runtime, say, loads but is refused by
// it), so that is checked next, with the runtime's reason.
const Driver& driver(const char* what) {
  const Driver& d = driver_state();
  if (!d.error.empty()) throw RuntimeError(std::string(what) + ": " + d.error);
  if (!tiny::cuda::available())
    throw RuntimeError(std::string(what) + ": CUDA is not available (" +
                       tiny::cuda::unavailable_reason() + ")");
  return d;
}

// A driver API failure, in the form cuda_check.h gives runtime failures (PyTorch says "CUDA
// driver error: <description>"); `detail` is appended when the bare code needs explaining.
[[noreturn]] void raise_driver_error(const Driver& d, CUresult r, const std::string& call,
                                     const std::string& detail = "") {
  const char* name = nullptr;
  const char* description = nullptr;
  if (d.get_error_name(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (d.get_error_string(r, &description) != CUDA_SUCCESS) description = nullptr;
  std::string message = std::string("CUDA driver error: ") +
                        (description ? description : "unknown error") + " (" +
                        (name ? name : std::to_string(static_cast<int>(r))) + ") in " + call;
  if (!detail.empty()) message += ": " + detail;
  throw RuntimeError(message);
}

// Makes sure the thread's current driver context is the one the runtime uses for the current
// device, so that the driver calls after it work on the runtime's memory. cudaSetDevice (in DeviceGuard) makes the device's primary context
// current since CUDA 12, but only when it is called: a thread that has not used the runtime yet,
// and whose device is already the right one, has no current context until the runtime is
// touched, which cudaFree(nullptr) does without doing anything else.
void make_runtime_context_current(const Driver& d) {
  CUcontext context = nullptr;
  if (const CUresult r = d.ctx_get_current(&context); r != CUDA_SUCCESS)
    raise_driver_error(d, r, "cuCtxGetCurrent");
  if (context) return;
  TINY_CUDA_CHECK(cudaFree(nullptr));
  if (const CUresult r = d.ctx_get_current(&context); r != CUDA_SUCCESS)
    raise_driver_error(d, r, "cuCtxGetCurrent");
  if (!context)
    throw RuntimeError("CUDA driver error: the CUDA runtime made no context current");
}

std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

// ---- compiling ---------------------------------------------------------------------------------

bool nvrtc_available() { return true; }

std::string nvrtc_compile(const std::string& source, const std::string& name, int arch) {
  const int target = ptx_arch(arch);
  Program program(source, name);
  // compute_NN (a virtual architecture) asks for PTX rather than a binary for one GPU, which the
  // driver then compiles for the GPU it loads on. No fast math: --use_fast_math would flush
  // denormals and use approximate division, square roots and transcendentals, so a fused kernel
  // would not give the results the library's own kernels (nvcc's defaults) give. The IEEE
  // defaults are spelled out so that this is visible here. Contraction into fused multiply-adds
  // stays at its default (on), as for the library's nvcc-built kernels.
  const std::string arch_option = "--gpu-architecture=compute_" + std::to_string(target);
  const char* options[] = {arch_option.c_str(), "-default-device", "--std=c++17",
                           "--ftz=false",       "--prec-div=true", "--prec-sqrt=true"};
  const nvrtcResult result =
      nvrtcCompileProgram(program.get(), static_cast<int>(std::size(options)), options);
  if (result == NVRTC_ERROR_COMPILATION)
    throw RuntimeError("CUDA NVRTC error: " + name + " did not compile (compute_" +
                       std::to_string(target) + ", NVRTC " + nvrtc_version() + "):\n" +
                       program.log() + "The source:\n" + numbered(source));
  check_nvrtc(result, "nvrtcCompileProgram");
  size_t size = 0;
  check_nvrtc(nvrtcGetPTXSize(program.get(), &size), "nvrtcGetPTXSize");
  std::string ptx(size, '\0');
  check_nvrtc(nvrtcGetPTX(program.get(), ptx.data()), "nvrtcGetPTX");
  ptx.resize(std::strlen(ptx.c_str()));  // the size counts the terminating NUL
  return ptx;
}

int current_device_arch() {
  if (!tiny::cuda::available())
    throw RuntimeError("current_device_arch: CUDA is not available (" +
                       tiny::cuda::unavailable_reason() + ")");
  int device = 0, major = 0, minor = 0;
  TINY_CUDA_CHECK(cudaGetDevice(&device));
  TINY_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  TINY_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

// ---- loading -----------------------------------------------------------------------------------

bool driver_available() { return driver_state().error.empty(); }

CudaKernel load_kernel(const std::string& ptx, const std::string& kernel_name) {
  const Driver& d = driver("load_kernel");
  CudaKernel k;
  k.name = kernel_name;
  TINY_CUDA_CHECK(cudaGetDevice(&k.device));
  make_runtime_context_current(d);
  // The driver compiles the PTX for this GPU here; when that fails, its log says why (the
  // error code alone would say only "invalid PTX").
  char log[8192] = {};
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof log))};
  CUmodule module = nullptr;
  if (const CUresult r = d.module_load_data_ex(&module, ptx.c_str(), 2, keys, values);
      r != CUDA_SUCCESS) {
    std::string detail = log;
    // The PTX names the PTX ISA of the NVRTC that wrote it; a driver older than that toolkit
    // cannot read it, and says only "unsupported PTX version".
    if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
      detail = "the driver (CUDA " + version_string(d.version) +
               ") is older than the NVRTC that wrote the PTX (CUDA " + nvrtc_version() +
               "); update the driver" + (detail.empty() ? "" : "; " + detail);
    raise_driver_error(d, r, "cuModuleLoadDataEx (loading the PTX of " + kernel_name + ")",
                       detail);
  }
  CUfunction function = nullptr;
  if (const CUresult r = d.module_get_function(&function, module, kernel_name.c_str());
      r != CUDA_SUCCESS) {
    d.module_unload(module);
    raise_driver_error(d, r, "cuModuleGetFunction(\"" + kernel_name + "\")",
                       r == CUDA_ERROR_NOT_FOUND
                           ? "the PTX has no kernel of that name (is it an extern \"C\" "
                             "__global__ function, so that its name is not mangled?)"
                           : "");
  }
  k.module = module;
  k.function = function;
  return k;
}

// ---- launching ---------------------------------------------------------------------------------

void launch(const CudaKernel& k, unsigned grid, unsigned block, void** args) {
  if (!k.function)
    throw RuntimeError("launch: the kernel " + (k.name.empty() ? "" : k.name + " ") +
                       "is not loaded (load_kernel returns a loaded one)");
  if (grid == 0) return;
  const Driver& d = driver("launch");
  // The module lives in k.device's context; launching it while another device's context is
  // current would fail with "invalid resource handle".
  cuda::DeviceGuard guard(k.device);
  make_runtime_context_current(d);
  // The backend's stream: every kernel and copy of the CUDA backend is queued on the runtime's
  // stream 0, the legacy default stream (cuda_backend.h, "Ordering"), and so is this kernel: the
  // driver's null stream is that same stream for the plain cuLaunchKernel. It therefore starts
  // after the ops that wrote its inputs and before any later op or copy reads its output.
  constexpr CUstream kBackendStream = nullptr;
  if (const CUresult r = d.launch_kernel(static_cast<CUfunction>(k.function), grid, 1, 1, block,
                                         1, 1, 0, kBackendStream, args, nullptr);
      r != CUDA_SUCCESS)
    raise_driver_error(d, r,
                       "cuLaunchKernel(" + k.name + ", grid " + std::to_string(grid) +
                           ", block " + std::to_string(block) + ")");
}

}  // namespace tiny::detail::jit
