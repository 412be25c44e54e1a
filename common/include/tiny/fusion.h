/// @file fusion.h
/// @brief Graph capture and fused kernels (chapter 09): `compile(fn)` watches `fn` run its
/// elementwise ops once, turns them into one kernel, and runs that kernel on later calls.
///
/// Eager execution runs every op as its own pass over memory: `gelu(x) * g + b + x` reads and
/// writes a 4096 x 4096 array nine times. A fused kernel reads each input once and writes the
/// result once. `compile` gets there the way torch.compile does, in four steps:
///
/// 1. **Capture.** The first call runs `fn` eagerly with a tracer listening to the dispatcher
///    (common/src/dispatch.cpp): every op-table op `fn` runs becomes a node of a graph, with the
///    inputs' shapes, strides and dtypes and the op's numbers. Anything the tracer cannot follow
///    (a matmul, a reduction, a copy, an in-place write) is a *graph break*: that signature then
///    runs eagerly, and stats() says why. The trace is a real call, with autograd as the caller
///    has it, and after a graph break its result is eager's, gradients included.
/// 2. **Code generation.** The graph becomes one loop nest in C++ source, each node's per-element
///    expression pasted from the op table (op_table.h's `source`), specialised to the shapes and
///    strides seen (as torch.compile specialises by default). On a CUDA tensor it becomes CUDA
///    source instead.
/// 3. **Compilation.** The C++ source is compiled at run time by the compiler the library was
///    built with and loaded with dlopen; the shared object is kept on disk under the hash of its
///    source, as PyTorch's inductor keeps its C++ kernels, so a later process loads it without
///    compiling. CUDA source is compiled by NVRTC and loaded through the driver. Where no
///    compiler can be run, a tile interpreter evaluates the same graph a cache-sized tile at a
///    time (still one pass over memory, without generated code), and backend() says so.
/// 4. **Reuse.** Later calls with the same signature (each input's dtype, shape, strides,
///    device, and whether it requires grad) run the kernel without calling `fn`; a new signature
///    traces and compiles again (a recompile, counted as torch.compile users watch them).
///
/// On inputs that require grad the compiled function records one autograd node,
/// `CompiledFunctionBackward`, whose backward is the captured graph's backward, built from the
/// op table's derivative formulas and fused and compiled the same way.
///
/// What is baked in: the numbers the ops were called with (`x * 0.5`'s 0.5, or a 0-dim tensor
/// `scalar_tensor(0.5)` makes inside `fn`) become constants of the kernel, as torch.compile
/// specialises on Python numbers. A function whose numbers change between calls must take them
/// as tensor inputs. Any other 0-dim tensor `fn` reads (one it captures, such as a weight it
/// closes over, or one an op the tracer cannot follow made, such as `x.max()`) is a graph break,
/// as a captured tensor of any other shape is: its value may change, it may be re-bound, or it
/// may need a gradient, after the trace. That signature runs `fn` eagerly at every call, which
/// reads the tensor then and gives it its gradient; torch.compile would lift such a tensor into
/// an input of the graph, and passing it as an argument does that here.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tiny/tensor.h"

namespace tiny {

/// Which way a compiled function runs its captured graph on the CPU.
enum class FusionBackend {
  Auto,         ///< generated C++ when the compiler can be run, else the tile interpreter
  Cpp,          ///< generated C++, compiled and loaded at run time (RuntimeError if impossible)
  Interpreter,  ///< the tile interpreter, never generating code
};

/// How `compile` works.
struct CompileOptions {
  FusionBackend backend = FusionBackend::Auto;  ///< how CPU graphs run (CUDA ones use NVRTC)
};

/// What a compiled function has done so far (torch.compile users read the same counters from
/// torch._dynamo.utils.counters).
struct CompileStats {
  int64_t calls = 0;            ///< calls of the compiled function
  int64_t compiles = 0;         ///< signatures traced and turned into kernels
  int64_t recompiles = 0;       ///< compiles after the first: a new shape, dtype, stride ...
  int64_t cache_hits = 0;       ///< calls that reused a kernel built by an earlier call
  int64_t disk_cache_hits = 0;  ///< kernels loaded from the disk cache instead of compiled
  int64_t graph_breaks = 0;     ///< calls run eagerly because the function could not be captured
  std::string last_break;       ///< why, for the last graph break ("" if none)
  double last_compile_seconds = 0;  ///< trace + generate + compile + load, for the last compile
};

/// What the fused kernel of one signature does per call: the FLOPs of its ops (the op table's
/// counts) and the bytes it must move (each input read once, each output written once).
struct KernelCost {
  double flops = 0;  ///< floating-point operations per call
  double bytes = 0;  ///< bytes read and written per call
  /// FLOPs per byte moved: the kernel's arithmetic intensity.
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

/// A function captured by compile(): call it like the function it wraps.
class CompiledFunction {
 public:
  /// A function of `arity` tensors, and the options it was compiled with (see compile()).
  CompiledFunction(size_t arity, std::function<Tensor(const std::vector<Tensor>&)> fn,
                   CompileOptions options);

  /// Calls the function on tensor arguments, as `fn(args...)`.
  template <typename... Args> Tensor operator()(const Args&... args) {
    return call(std::vector<Tensor>{static_cast<const Tensor&>(args)...});
  }
  /// Calls the function on `inputs`: the kernel of their signature, traced and compiled first
  /// when the signature is new; eagerly after a graph break. TypeError for a wrong number of
  /// inputs.
  Tensor call(const std::vector<Tensor>& inputs);

  /// The counters so far.
  const CompileStats& stats() const;
  /// How the last call ran: "C++ kernel (<compiler>)", "tile interpreter (...)", "CUDA kernel
  /// (NVRTC)", or "eager (graph break: ...)"; "" before the first call.
  std::string backend() const;
  /// The generated source of the last call's kernel ("" if it had none).
  std::string source() const;
  /// The source of the last call's backward kernel ("" if it had none).
  std::string backward_source() const;
  /// The captured graph of the last call, one node per line, as `print(graph)` would show it.
  std::string graph() const;
  /// What the last call's fused kernel costs (zero after a graph break).
  KernelCost cost() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

namespace detail {
/// How many arguments a function object takes (through std::function's deduction guide).
template <typename Signature> struct FunctionArity;
template <typename R, typename... A> struct FunctionArity<std::function<R(A...)>> {
  static constexpr size_t value = sizeof...(A);
};
}  // namespace detail

/// Captures `fn`, a function of tensors returning a tensor, for fusion (see the file comment):
/// `auto fast = compile([](const Tensor& x, const Tensor& g) { return gelu(x) * g; });`
template <typename F> CompiledFunction compile(F fn, CompileOptions options = {}) {
  constexpr size_t arity = detail::FunctionArity<decltype(std::function(fn))>::value;
  return CompiledFunction(
      arity,
      [fn = std::move(fn)](const std::vector<Tensor>& in) -> Tensor {
        return [&]<size_t... I>(std::index_sequence<I...>) {
          return Tensor(fn(in[I]...));
        }(std::make_index_sequence<arity>{});
      },
      options);
}

}  // namespace tiny
