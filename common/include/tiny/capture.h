/// @file capture.h
/// @brief CPUGraph: a step of work captured once, as the list of kernels it ran, and replayed
/// without the dispatcher, the tape or the optimizer's bookkeeping (torch.cuda.CUDAGraph's idea,
/// on the CPU).
///
/// An eager op spends most of its time deciding what to run: dtypes, broadcasting, the output's
/// allocation, the autograd record. On a small model those decisions cost several times the
/// arithmetic, and they come out the same at every step. capture() runs a function once, as
/// usual, and keeps, in order, every kernel it launched, with the tensors each one read and wrote;
/// replay() runs those kernels again on the same memory, and nothing else:
///
///     tiny::CPUGraph step;
///     step.capture([&] {
///       loss = cross_entropy(model(x), y);   // x, y: tensors the loop refills before replay()
///       opt.zero_grad();
///       loss.backward();
///       opt.step();
///     });
///     for (...) { x.copy_(next_x); y.copy_(next_y); step.replay(); }   // loss: this step's
///
/// What a replay does again and what it does not:
/// - every kernel, on the memory it ran on: inputs are read where they were (so new values are
///   copied into them, as above), and results are written where they were, including the
///   tensors the function returned or stored (the loss, the parameters' .grad);
/// - the host work that a step needs afresh: the optimizers' step counters and bias corrections,
///   and cross_entropy's check of its class indices (which raises IndexError from replay() for a
///   class out of range), run again as part of the graph;
/// - nothing else: numbers the function computed on the host are fixed at capture, as Python
///   numbers are in a CUDA graph (a learning rate changed later, a new shape, a parameter's
///   tensor replaced: capture again). What cannot be replayed is refused while capturing, with
///   a RuntimeError: reading or writing a tensor's elements on the host (item(), data_ptr(),
///   printing one), random draws, a compiled function's kernel, and work on a GPU.
/// C++ code of the function itself (a hook, a counter, a print of something other than a
/// tensor) runs once, at capture; only the kernels it launched replay. So does work done the
/// first time only: a buffer made on the first call is made once, but the kernel that zeroed it
/// replays, as in a CUDA graph; run such a function once before capturing it (the library's
/// optimizers make their state outside the graph for this reason).
/// The graph holds every tensor its kernels touch, so the memory stays valid however long it
/// lives; reset() lets it go. Only the capturing thread records; nothing else changes for other
/// threads. ch06 and bench/bench_router.cpp use it for the router's training loop.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

namespace tiny {

/// Kernels captured from one run of a function, replayed on the same memory.
class CPUGraph {
 public:
  /// An empty graph: capture() fills it.
  CPUGraph();
  ~CPUGraph();
  /// Moves the capture (and the tensors it holds) over; the old graph is left empty. A graph
  /// moved while it is capturing takes the capture under way with it.
  CPUGraph(CPUGraph&&) noexcept;
  /// Drops this graph's capture and moves `other`'s over; `other` is left empty.
  CPUGraph& operator=(CPUGraph&&) noexcept;
  CPUGraph(const CPUGraph&) = delete;
  CPUGraph& operator=(const CPUGraph&) = delete;

  /// Runs `fn` once, as it would run without a graph, and keeps what it launched. RuntimeError
  /// if this graph already holds a capture, if another capture is under way on this thread, or
  /// if `fn` does something a replay could not repeat (see the file comment); an exception from
  /// `fn` leaves the graph empty and is passed on.
  void capture(const std::function<void()>& fn);
  /// Runs the captured kernels and host steps again, in order. RuntimeError without a capture.
  void replay();
  /// Drops the capture and the tensors it held; the graph can capture again. RuntimeError from
  /// inside this graph's own capture.
  void reset();
  /// Whether the graph holds a capture.
  bool captured() const;
  /// The kernels launched by the captured function.
  int64_t kernels() const;
  /// The pieces of host work replayed with them (optimizer step counters, class checks).
  int64_t host_steps() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with a capture under way (capture.cpp)
};

/// Whether this thread is capturing a CPUGraph now (torch.cuda.is_current_stream_capturing()).
bool is_capturing();

}  // namespace tiny
