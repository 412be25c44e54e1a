// runtime.cu: the device itself: is there one, what is it, its memory, copies to and from it,
// waiting for it, and events. Compiled by nvcc whenever the toolkit is present, so a CUDA compile
// error breaks the build even on a machine without a GPU. On a machine without a driver the
// runtime reports an error instead of a device count, and every query here turns that into
// "not available", with the runtime's reason; nothing else is called.
#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "../src/cuda_backend.h"
#include "cuda_check.h"
#include "tiny/device.h"

namespace tiny::cuda {
namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    const cudaError_t err = cudaGetDeviceCount(&p.count);
    if (err != cudaSuccess) {
      p.count = 0;
      p.reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(err) + " (" +
                 cudaGetErrorString(err) + ")";
      cudaGetLastError();  // clear the sticky error so later calls start clean
    } else if (p.count == 0) {
      p.reason = "the CUDA driver reports no devices";
    }
    return p;
  }();
  return result;
}

}  // namespace

bool compiled() { return true; }
bool available() { return probe().count > 0; }
std::string unavailable_reason() { return available() ? "" : probe().reason; }
int device_count() { return probe().count; }

std::string device_name(int i) {
  if (i < 0 || i >= device_count()) return "";
  return get_device_properties(i).name;
}

DeviceProperties get_device_properties(int i) {
  require_device(i);
  cudaDeviceProp prop{};
  TINY_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
  DeviceProperties p;
  p.name = prop.name;
  p.major = prop.major;
  p.minor = prop.minor;
  p.total_memory = static_cast<int64_t>(prop.totalGlobalMem);
  p.multi_processor_count = prop.multiProcessorCount;
  p.l2_cache_size = prop.l2CacheSize;
  return p;
}

void synchronize(int i) {
  require_device(i);
  detail::cuda::DeviceGuard guard(i);
  TINY_CUDA_CHECK(cudaDeviceSynchronize());
}

struct Event::Impl {
  cudaEvent_t event = nullptr;
  int device = 0;
  bool recorded = false;
};

Event::Event() : impl_(std::make_unique<Impl>()) {
  require_device(0);
  TINY_CUDA_CHECK(cudaGetDevice(&impl_->device));
  TINY_CUDA_CHECK(cudaEventCreate(&impl_->event));
}

Event::~Event() {
  if (impl_ && impl_->event) cudaEventDestroy(impl_->event);
}

void Event::record() {
  detail::cuda::DeviceGuard guard(impl_->device);
  TINY_CUDA_CHECK(cudaEventRecord(impl_->event, 0));
  impl_->recorded = true;
}

void Event::synchronize() const {
  if (impl_->recorded) TINY_CUDA_CHECK(cudaEventSynchronize(impl_->event));
}

bool Event::query() const {
  if (!impl_->recorded) return true;
  const cudaError_t err = cudaEventQuery(impl_->event);
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  TINY_CUDA_CHECK(err);
  return true;
}

double Event::elapsed_time(const Event& end) const {
  if (!impl_->recorded || !end.impl_->recorded)
    throw RuntimeError("elapsed_time: both events must be recorded first");
  float ms = 0;
  TINY_CUDA_CHECK(cudaEventElapsedTime(&ms, impl_->event, end.impl_->event));
  return ms;
}

}  // namespace tiny::cuda

namespace tiny::detail::cuda {

// ---- memory ------------------------------------------------------------------------------------

void* device_malloc(size_t nbytes, int device) {
  DeviceGuard guard(device);
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, nbytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;  // the caching allocator frees its cache and tries again, then raises
  }
  TINY_CUDA_CHECK(err);
  return p;
}

// Frees run inside destructors, where an exception would end the program; a failure there
// (the runtime already torn down at exit, say) is cleared and ignored, as PyTorch does.
void device_free(void* ptr, int device) {
  int previous = 0;
  cudaGetDevice(&previous);
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(ptr) != cudaSuccess) cudaGetLastError();
  cudaSetDevice(previous);
}

namespace {

// Non-blocking copies that touch pinned host memory, not yet known to be finished: one event
// per device, recorded after the latest such copy. Every copy on a device runs on its one
// stream, in order, so when the latest has finished, all earlier ones have too. Waiting on it
// before a pinned block is reused is coarser than tracking each block, and just as safe.
struct PendingCopies {
  std::mutex mutex;
  std::vector<cudaEvent_t> last;  // per device; null when nothing is pending
};

PendingCopies& pending() {
  static PendingCopies* p = new PendingCopies();
  return *p;
}

void note_pinned_copy(int device) {
  auto& p = pending();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.last.size() <= static_cast<size_t>(device)) p.last.resize(device + 1, nullptr);
  if (!p.last[device])
    TINY_CUDA_CHECK(cudaEventCreateWithFlags(&p.last[device], cudaEventDisableTiming));
  TINY_CUDA_CHECK(cudaEventRecord(p.last[device], 0));
}

}  // namespace

void* pinned_malloc(size_t nbytes) {
  tiny::cuda::require_device(0);
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, nbytes, cudaHostAllocDefault);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  TINY_CUDA_CHECK(err);
  return p;
}

void pinned_wait_idle(void*) {
  auto& p = pending();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (cudaEvent_t e : p.last)
    if (e) TINY_CUDA_CHECK(cudaEventSynchronize(e));
}

void pinned_free(void* ptr) {
  {
    auto& p = pending();
    std::lock_guard<std::mutex> lock(p.mutex);
    for (cudaEvent_t e : p.last)
      if (e) cudaEventSynchronize(e);  // errors ignored, as in device_free
  }
  if (cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError();
}

// ---- copies ------------------------------------------------------------------------------------

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
                bool non_blocking, bool host_is_pinned) {
  if (nbytes == 0) return;
  const Device gpu = dst_device.is_cuda() ? dst_device : src_device;
  DeviceGuard guard(gpu.index);
  cudaMemcpyKind kind = cudaMemcpyDeviceToDevice;
  if (src_device.is_cpu()) kind = cudaMemcpyHostToDevice;
  else if (dst_device.is_cpu()) kind = cudaMemcpyDeviceToHost;
  // Queued behind the work already on the stream, so a copy back to the host sees the results
  // of every kernel issued before it; copies between GPU buffers never make the host wait.
  if (kind == cudaMemcpyDeviceToDevice && dst_device.index != src_device.index)
    TINY_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes, 0));
  else TINY_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, 0));
  if (kind == cudaMemcpyDeviceToDevice) return;
  // With pageable host memory the runtime itself returns only when the host side is done with
  // it (staged, or landed). Pinned memory is read and written by the GPU's copy engine directly,
  // so the call returns at once: non_blocking keeps it that way (and remembers the buffer is
  // busy); otherwise we wait, so that the caller may reuse or read the host buffer.
  if (!host_is_pinned) return;
  if (non_blocking) note_pinned_copy(gpu.index);
  else TINY_CUDA_CHECK(cudaStreamSynchronize(0));
}

void zero_bytes(void* ptr, size_t nbytes, int device) {
  if (nbytes == 0) return;
  DeviceGuard guard(device);
  TINY_CUDA_CHECK(cudaMemsetAsync(ptr, 0, nbytes, 0));
}

}  // namespace tiny::detail::cuda
