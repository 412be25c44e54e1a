// capture.cpp: CPUGraph, a function's kernels captured once and replayed (tiny/capture.h).
//
// A capture is a list of closures in launch order. Each one holds, by value, the tensors it
// reads and writes, which keeps their memory alive and at the same addresses for as long as the
// graph lives: a temporary that the captured function freed halfway through is still there
// for the kernels that used it, and no later allocation can be handed its block.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "capture_internal.h"
#include "tiny/capture.h"
#include "tiny/error.h"

namespace tiny {
namespace detail {

constinit thread_local CaptureState* t_capture = nullptr;
constinit thread_local int t_host_scope = 0;

struct CaptureState {
  std::vector<std::function<void()>> work;
  int64_t kernels = 0, host_steps = 0;
};

void check_capture_device(Device device) {
  if (recording() && !device.is_cpu())
    throw RuntimeError("CPUGraph captures CPU work only, but work was launched on " + device.str() +
                       ": move the tensors to the CPU, or run that part outside "
                       "the captured function");
}

void record_kernel(Device device, std::function<void()> work) {
  check_capture_device(device);
  t_capture->work.push_back(std::move(work));
  ++t_capture->kernels;
}

std::function<void()>& record_host_step(std::function<void()> work) {
  t_capture->work.push_back(std::move(work));
  ++t_capture->host_steps;
  return t_capture->work.back();
}

void record_constant(const Tensor& t) {
  if (!recording()) return;
  Tensor values = empty(t.shape(), t.dtype());
  {
    const HostScope copying;
    std::memcpy(values.data_ptr(), t.data_ptr(), t.nbytes());
  }
  const auto copy = backend(Device::cpu()).copy;
  record_kernel(Device::cpu(), [copy, t, values] { copy(t, values); });
}

}  // namespace detail

struct CPUGraph::Impl {
  detail::CaptureState state;
  bool captured = false;
  bool capturing = false;
};

CPUGraph::CPUGraph() : impl_(std::make_shared<Impl>()) {}
CPUGraph::~CPUGraph() = default;
CPUGraph::CPUGraph(CPUGraph&&) noexcept = default;
CPUGraph& CPUGraph::operator=(CPUGraph&&) noexcept = default;

void CPUGraph::capture(const std::function<void()>& fn) {
  if (!impl_) impl_ = std::make_shared<Impl>();  // a moved-from graph starts afresh
  if (impl_->captured)
    throw RuntimeError(
        "This CPUGraph instance already owns a captured graph. To capture a new graph, call "
        "reset() or create a new instance.");
  if (detail::t_capture != nullptr)
    throw RuntimeError("cannot capture a CPUGraph inside another capture on the same thread");
  if (detail::t_host_scope != 0)
    throw RuntimeError("cannot capture a CPUGraph from inside captured work");
  if (!fn) throw RuntimeError("CPUGraph.capture(): got an empty function");
  detail::CaptureState state;
  // The capture is kept for this graph's state, wherever fn moves the graph meanwhile: `target`
  // holds it alive, so a graph moved into a local of fn (and destroyed with it) cannot leave the
  // capture writing into freed memory; the capture then lands in the state that local owned.
  const std::shared_ptr<Impl> target = impl_;
  // Restores "not capturing" however fn ends; on an exception the partial capture is dropped.
  struct Scope {
    Scope(detail::CaptureState* s, Impl* impl) : impl(impl) {
      detail::t_capture = s;
      impl->capturing = true;
    }
    ~Scope() {
      detail::t_capture = nullptr;
      impl->capturing = false;
    }
    Impl* impl;
  } scope(&state, target.get());
  fn();
  target->state = std::move(state);
  target->captured = true;
}

void CPUGraph::replay() {
  if (!impl_ || !impl_->captured)
    throw RuntimeError("Called CPUGraph::replay without a preceding successful capture.");
  if (detail::recording())
    throw RuntimeError("cannot replay a CPUGraph while capturing another one on this thread");
  for (const auto& work : impl_->state.work) work();
}

void CPUGraph::reset() {
  if (impl_ && impl_->capturing)
    throw RuntimeError("cannot reset a CPUGraph while it is capturing");
  if (impl_) impl_ = std::make_shared<Impl>();
}

bool CPUGraph::captured() const { return impl_ && impl_->captured; }
int64_t CPUGraph::kernels() const { return impl_ ? impl_->state.kernels : 0; }
int64_t CPUGraph::host_steps() const { return impl_ ? impl_->state.host_steps : 0; }

bool is_capturing() { return detail::t_capture != nullptr; }

}  // namespace tiny
