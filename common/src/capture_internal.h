// capture_internal.h: how the library's launch sites feed a CPUGraph (tiny/capture.h). Not part
// of the public API.
//
// Every place that runs a kernel goes through launch() (or, where the call does not fit its
// shape, records by hand with record_kernel()); host work that a replay must repeat goes through
// host_step(). Outside a capture both simply run what they are given. While this thread
// captures, they also keep a copy of it, holding every tensor it touches, and run it inside a
// HostScope: the one place where host code may touch tensor memory during a capture
// (Tensor::data_ptr() refuses everywhere else, since a replay would not repeat that access).
#pragma once
#include <functional>
#include <type_traits>
#include <utility>

#include "tiny/device.h"
#include "tiny/tensor.h"

namespace tiny::detail {

struct CaptureState;
/// The capture under way on this thread (nullptr: none).
extern thread_local constinit CaptureState* t_capture;
/// Above 0 while this thread runs captured work (a kernel, a host step) or writes a constant.
extern thread_local constinit int t_host_scope;

/// Whether a kernel launched now must be recorded: a capture is under way on this thread and the
/// launch is not itself part of a recorded piece of work.
inline bool recording() { return t_capture != nullptr && t_host_scope == 0; }

/// Marks host code that may touch tensor memory during a capture: captured work as it runs, or
/// a factory writing numbers it was given (constants of the graph, as a Python number is).
struct HostScope {
  HostScope() { ++t_host_scope; }
  ~HostScope() { --t_host_scope; }
  HostScope(const HostScope&) = delete;
  HostScope& operator=(const HostScope&) = delete;
};

/// While recording, RuntimeError unless `device` is the CPU (the one device a CPUGraph replays).
void check_capture_device(Device device);

/// Adds work to the capture under way: a kernel (RuntimeError for a device other than the CPU)
/// or a host step. The host step is returned, so that the capture runs the very copy it keeps:
/// one whose state changes as it runs (SGD's first step) starts its replays from that state.
void record_kernel(Device device, std::function<void()> work);
std::function<void()>& record_host_step(std::function<void()> work);

/// For a tensor the host has just filled with numbers the caller gave (arange, tensor,
/// scalar_tensor): while recording, keeps a copy of its values and records a kernel that writes
/// them back at every replay, so that a constant the captured function then changes in place
/// (`acc = scalar_tensor(0); acc += x`) starts each replay as it started the capture.
void record_constant(const Tensor& t);

/// Runs kernel(args...); while recording, also keeps a copy that holds each argument by value.
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), const Args&... args) {
  if (recording()) [[unlikely]] {
    const Device device = [](const Tensor& first, const auto&...) {
      return first.device();
    }(args...);
    record_kernel(device, [kernel, args...] { kernel(args...); });
    const HostScope running;
    kernel(args...);
    return;
  }
  kernel(args...);
}

/// Runs work(); while recording, also keeps a copy, replayed with the kernels in order.
template <typename F> void host_step(F&& work) {
  if (recording()) [[unlikely]] {
    std::function<void()>& kept = record_host_step(std::function<void()>(std::forward<F>(work)));
    const HostScope running;
    kept();
    return;
  }
  work();
}

}  // namespace tiny::detail
