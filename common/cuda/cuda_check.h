// cuda_check.h: every CUDA runtime and cuBLAS call goes through a check, so a failure raises a
// RuntimeError naming the call and the runtime's message instead of being ignored.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "tiny/error.h"

namespace tiny::detail::cuda {

[[noreturn]] inline void raise_cuda_error(cudaError_t err, const char* call) {
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw RuntimeError(std::string("CUDA error: ") + cudaGetErrorString(err) + " (" +
                     cudaGetErrorName(err) + ") in " + call);
}

inline void check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) raise_cuda_error(err, call);
}

inline void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw RuntimeError(std::string("CUDA error: ") + cublasGetStatusName(status) + " (" +
                       cublasGetStatusString(status) + ") in " + call);
}

/// Makes `device` current for the lifetime of the guard (kernels, allocations and cuBLAS calls
/// go to the current device), and restores the previous one after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (device != previous_) check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace tiny::detail::cuda

/// Runs a CUDA runtime or cuBLAS call and raises if it fails.
#define TINY_CUDA_CHECK(call) ::tiny::detail::cuda::check((call), #call)
/// Raises if the last kernel launch failed (a bad configuration is reported at launch).
#define TINY_KERNEL_CHECK() ::tiny::detail::cuda::check(cudaGetLastError(), "kernel launch")
