// cuda_jit.h: turning CUDA C++ source, written while the program runs, into a kernel that runs
// on the GPU. Chapter 09's fusion pass generates one elementwise kernel per fused group of ops;
// this layer compiles it (NVRTC), loads it (the CUDA driver API) and launches it on the stream
// the CUDA backend uses, so it is ordered with every other op. Not part of the public API.
//
// The three steps are separate so that the caller can cache what it needs: the PTX of a kernel
// is the same for every device of one architecture, a loaded kernel belongs to one device.
//
// Implemented in common/cuda/cuda_jit.cpp when the library is built with CUDA, and by
// common/cuda/cuda_absent.cpp (every call raises, saying the library was built without CUDA)
// otherwise, so the same callers link either way.
#pragma once
#include <string>

namespace tiny::detail::jit {

/// True when the library was built with CUDA (NVRTC is linked in).
bool nvrtc_available();

/// Compiles CUDA C++ `source` with NVRTC to PTX for compute capability `arch` (e.g. 90 for
/// sm_90), with -default-device, --std=c++17, -use_fast_math OFF (IEEE results), and
/// `name` as the program name. Throws tiny::RuntimeError with NVRTC's log on a compile error.
///
/// When `arch` is newer than this NVRTC knows, the PTX targets the newest architecture it does
/// know (the driver compiles PTX forward to any later GPU); an `arch` older than every one it
/// supports raises. Needs no GPU and no driver.
std::string nvrtc_compile(const std::string& source, const std::string& name, int arch);

/// The compute capability (major*10+minor) of the current CUDA device; RuntimeError without one.
int current_device_arch();

/// A kernel loaded through the CUDA driver API.
struct CudaKernel {
  void* module = nullptr;    ///< the CUmodule holding the loaded PTX
  void* function = nullptr;  ///< the CUfunction of the kernel inside it
  int device = 0;            ///< the device whose primary context the module was loaded into
  std::string name;          ///< the kernel's name, for error messages
};

/// True when the CUDA driver library (libcuda.so.1) can be opened and initialised, that is,
/// when load_kernel can work on this machine (a GPU is still needed to launch).
bool driver_available();

/// Loads `ptx` and finds `kernel_name` (an extern "C" __global__ function) through the driver
/// API. The driver library (libcuda.so.1) is opened with dlopen on first use, so binaries still
/// start on machines without a driver; without one this throws a RuntimeError that says so.
///
/// The module goes into the primary context of the current device, the context the CUDA
/// runtime (and so the rest of the library) uses; it stays loaded until the program ends.
CudaKernel load_kernel(const std::string& ptx, const std::string& kernel_name);

/// Launches `k` with a 1-D grid on the stream the library's CUDA backend queues its work on
/// (so it is ordered with every other op), args as cuLaunchKernel takes them.
///
/// The launch goes to `k.device` whatever device is current, and returns without waiting for
/// the kernel. A grid of 0 blocks (an empty tensor) launches nothing.
void launch(const CudaKernel& k, unsigned grid, unsigned block, void** args);

}  // namespace tiny::detail::jit
