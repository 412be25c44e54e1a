/// @file device.h
/// @brief Where a tensor's memory lives: the CPU, or a CUDA device.
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

namespace tiny {

/// A device: the CPU, or CUDA device `index`. Every op runs where its inputs are.
struct Device {
  /// The kinds of device.
  enum class Type { CPU, CUDA };
  Type type = Type::CPU;  ///< CPU or CUDA
  int index = 0;          ///< which CUDA device (0 for the CPU)

  /// The CPU.
  static Device cpu() { return Device{Type::CPU, 0}; }
  /// CUDA device `i`.
  static Device cuda(int i = 0) { return Device{Type::CUDA, i}; }
  /// True for the CPU.
  bool is_cpu() const { return type == Type::CPU; }
  /// True for a CUDA device.
  bool is_cuda() const { return type == Type::CUDA; }
  /// "cpu" or "cuda:0", as PyTorch prints devices.
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  /// Devices are equal when type and index are.
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.index == b.index;
  }
};

/// Prints the device as str() does.
inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

/// Waits until all work queued on `device` has finished: cuda::synchronize for a GPU, nothing for
/// the CPU (whose work is done when the call that does it returns).
void synchronize(Device device);

/// Which of PyTorch's two CPU kernel families the library imitates, where their results differ
/// in the last bits (random numbers, optimizer steps; random.h and optim.h say where). PyTorch
/// compiles its CPU kernels for plain x86-64 and for AVX2 processors and picks the AVX2 copy on
/// processors with AVX2 and FMA; so does this library, so that on one machine both give the same
/// bits.
enum class CpuCapability {
  Default,  ///< plain x86-64: C library math, every multiply and add rounded on its own
  Avx2,     ///< AVX2 + FMA: eight-wide polynomial log/sin/cos, fused multiply-adds
};
/// The family in use: Avx2 when the processor has AVX2 and FMA, unless the environment variable
/// TINY_CPU_CAPABILITY is "default" (PyTorch's ATEN_CPU_CAPABILITY=default; read once, at the
/// first call) or set_cpu_capability() chose otherwise.
CpuCapability cpu_capability();
/// Chooses the family (tests use it to check both on one machine). Throws RuntimeError for Avx2
/// on a processor without AVX2 and FMA.
void set_cpu_capability(CpuCapability capability);

namespace cuda {
/// True when this binary was built with CUDA and a driver and device are present.
bool available();
/// Why available() is false ("" when it is true).
std::string unavailable_reason();
/// Number of CUDA devices (0 without CUDA).
int device_count();
/// The name of device `i`, as the driver reports it.
std::string device_name(int i = 0);
/// True when this binary was compiled with the CUDA parts.
bool compiled();
/// RuntimeError with unavailable_reason() unless CUDA device `i` can be used.
void require_device(int i = 0);

/// What torch.cuda.get_device_properties(i) reports.
struct DeviceProperties {
  std::string name;               ///< the product name, "NVIDIA H200"
  int major = 0;                  ///< compute capability, major (9 for Hopper)
  int minor = 0;                  ///< compute capability, minor
  int64_t total_memory = 0;       ///< bytes of device memory
  int multi_processor_count = 0;  ///< streaming multiprocessors: the units that run blocks
  int64_t l2_cache_size = 0;      ///< bytes of L2 cache
  /// PyTorch's printed form, here an H200's: ``_CudaDeviceProperties(name='...', major=9,``
  /// ``minor=0, total_memory=143167MB, multi_processor_count=132)``.
  std::string str() const;
};
/// The properties of CUDA device `i`.
DeviceProperties get_device_properties(int i = 0);

/// Waits until every kernel and copy queued on device `i` has finished
/// (torch.cuda.synchronize()). GPU calls return once the work is queued; a timer must call this
/// before it reads the clock.
void synchronize(int i = 0);

/// A marker in the device's stream of work (torch.cuda.Event): record() puts it after the work
/// queued so far; the GPU stamps it when it gets there. Two events time the work between them
/// on the GPU's own clock, with no host round trip in the measurement.
class Event {
 public:
  /// An event on the current device; RuntimeError without a device.
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  /// Marks the current end of the device's queue.
  void record();
  /// Waits until the GPU has reached this event.
  void synchronize() const;
  /// True when the GPU has passed this event (non-blocking).
  bool query() const;
  /// Milliseconds of GPU time from this event to `end` (both recorded and reached).
  double elapsed_time(const Event& end) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
}  // namespace cuda

}  // namespace tiny
