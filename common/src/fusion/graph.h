// graph.h: the graph compile() captures, the tracer that captures it, and the code that turns
// it into kernels (chapter 09). Not part of the public API (fusion.h is).
//
// A graph is a list of values in the order eager execution made them. Each value is an input
// (an argument of the compiled function, read through a view of its own: an input's transpose is
// an input read with other strides), a constant (a number the function used: an op's Scalar, or
// a 0-dim tensor it made from one), one op-table op applied to earlier values, a dtype conversion
// (Tensor::to) or a where(). Every value lives in the loop over the graph's output shape: an
// input or value of a smaller shape is read there as broadcasting reads it.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dispatch.h"
#include "tiny/fusion.h"

namespace tiny::detail::fusion {

/// One value of a graph.
struct Value {
  enum class Kind : uint8_t { Input, Constant, Op, Cast, Where };
  Kind kind = Kind::Op;
  Shape shape;   ///< its shape (an op's: the broadcast of its arguments')
  DType dtype;   ///< the dtype eager execution gives it
  // Input: argument `arg` read through this view, its offset counted from the argument's first
  // element (its data_ptr()).
  int arg = -1;
  Strides strides;
  int64_t offset = 0;
  // Constant: its value.
  double constant = 0;
  // Op: the row that was called (its derivative and cost), the row whose kernel ran (its
  // source: a cheaper row may compute the same values), the arguments, the op's numbers, and
  // the dtype eager computes in. Cast: args[0] converted to `dtype`. Where: args[0] (bool)
  // chooses between args[1] and args[2], computed in `compute`.
  const OpEntry* op = nullptr;
  const OpEntry* kernel = nullptr;
  std::array<int, 3> args{-1, -1, -1};
  ops::Scalars scalars;
  DType compute = kFloat32;
};

/// A captured graph: the values, which of them the kernel writes, and the loop's shape.
struct Graph {
  int num_args = 0;            ///< arguments of the function the kernel runs
  std::vector<Value> values;   ///< in order of execution: arguments before their users
  std::vector<int> outputs;    ///< values written out, each with the loop's shape, contiguous
  Shape shape;                 ///< the shape of every output
  std::vector<int> traced_ids; ///< each value's number in the tracer that captured it
  /// One value per line: "%3 = mul(%1, %2)  float32 [4096, 4096]".
  std::string str() const;
  /// What one run costs on arguments of `arg_bytes` bytes each: the op table's FLOPs per element,
  /// each argument read once, each output written once (chapter 09's exercise).
  KernelCost cost(const std::vector<double>& arg_bytes) const;
};

/// Watches the dispatcher while alive (one per thread at a time) and builds a graph from the ops
/// it runs on the arguments it was given. The ops still run eagerly: the trace is a real call.
class Tracer {
 public:
  explicit Tracer(const std::vector<Tensor>& args);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// The tracer of this thread, or null.
  static Tracer* active();
  /// Called by run() for every op, after its kernel: records the op, or the reason it cannot be.
  void on_op(const Call& call, const std::array<const Tensor*, 3>& inputs, DType compute,
             const Tensor& result);
  /// Called by Tensor::to(dtype) and where(): the two non-table ops a graph holds.
  void on_cast(const Tensor& source, const Tensor& result);
  void on_where(const Tensor& condition, const Tensor& a, const Tensor& b, const Tensor& result);
  /// Called by detail::number_tensor: a number the library made while the function ran (x * 0.5's
  /// 0.5), which the graph may hold as a constant. Other 0-dim tensors are not numbers.
  void on_number(const Tensor& t);
  /// Stops this thread's tracer from listening while alive: for the conversions an op makes of
  /// its own inputs, which are part of the op, not of the graph.
  class Pause {
   public:
    Pause() : paused_(t_active_ref()) { t_active_ref() = nullptr; }
    ~Pause() { t_active_ref() = paused_; }
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;

   private:
    Tracer* paused_;
  };
  /// Records that the function did something a graph cannot hold.
  void fail(std::string reason);

  /// Why the trace failed ("" if it did not).
  const std::string& failure() const { return failure_; }
  /// The graph whose outputs are `outputs` (tensors the function computed, of one shape), without
  /// the values they do not need; sets failure() and returns an empty graph when it cannot be
  /// built. An output may be an input read as it is only when `inputs_may_be_outputs`.
  Graph finish(const std::vector<Tensor>& outputs, bool inputs_may_be_outputs = false);

  /// The value `t` is, adding an input or constant value when it is one; -1 (and failure()) when
  /// the trace cannot say where `t` came from.
  int value_of(const Tensor& t, const char* user);
  /// The eager tensor of value `id`.
  const Tensor& tensor_of(int id) const { return tensors_[id]; }
  /// Registers `t` as one more argument (the backward's incoming gradient) and returns its value.
  int add_argument(const Tensor& t);
  /// Argument `k` as the tracer was given it.
  const Tensor& argument(int k) const { return args_[k]; }
  /// The values recorded so far.
  const std::vector<Value>& values() const { return values_; }

 private:
  std::vector<Tensor> args_;
  std::vector<Value> values_;
  std::vector<Tensor> tensors_;  // each value's eager tensor, kept alive so no memory is reused
  std::unordered_multimap<const Storage*, int> by_storage_;
  // The numbers made during the trace, by their memory; kept alive, so that no tensor the
  // function captured or computed later can get their memory and pass for one.
  std::unordered_map<const Storage*, Tensor> numbers_;
  std::string failure_;
  Tracer* previous_;
  static Tracer*& t_active_ref();
  int push(Value v, const Tensor& t);
  bool is_number(const Tensor& t) const;
};

/// The backward pass of a captured graph.
struct BackwardGraph {
  Graph graph;             ///< arguments: the forward's, then the output's gradient
  std::vector<int> grads;  ///< per forward argument: its output in `graph`, or -1 for none
};
/// The graph of the backward pass of `forward` (whose values `tracer` recorded): its outputs are
/// the gradients of the arguments in `needs_grad` (each at the forward output's shape: the tape
/// sums it down to the argument's), computed by running the op table's derivative formulas
/// under `tracer`. An empty graph, with `reason` set, when some formula cannot be captured.
BackwardGraph backward_graph(Tracer& tracer, const Graph& forward,
                             const std::vector<bool>& needs_grad, std::string& reason);

/// The loop a kernel runs: the output's dimensions, with neighbours merged wherever every input
/// steps through both as through one (a contiguous input, or one broadcast along both).
struct Loop {
  std::vector<int64_t> sizes;                 ///< per loop dimension, outermost first
  std::vector<std::vector<int64_t>> strides;  ///< per value (inputs only): per loop dimension
};
Loop make_loop(const Graph& graph);

/// The C++ source of a kernel for `graph` (whose input values carry the layouts the kernel is
/// specialised to), with the entry point `extern "C" void <name>(char* const* data, long long
/// begin, long long end)`: data[k] is argument k's data_ptr(), then one pointer per output, and
/// only the outputs whose outermost loop index lies in [begin, end) are computed.
std::string cpp_source(const Graph& graph, const std::string& name);
/// The CUDA source of the same kernel: `extern "C" __global__ void <name>(Pointers p)`, one
/// thread per output element.
std::string cuda_source(const Graph& graph, const std::string& name);

/// Runs `graph` without generated code, a tile of output elements at a time (one pass over
/// memory). `outputs` are allocated by the caller.
void interpret(const Graph& graph, const std::vector<Tensor>& args,
               const std::vector<Tensor>& outputs);

/// A kernel compiled from C++ source: compiles `source` with the host compiler into a shared
/// object in the disk cache (unless one with the same hash is there) and loads it.
struct CppKernel {
  /// Computes the outputs whose outermost loop index (Loop::sizes[0]) lies in [begin, end).
  using Entry = void (*)(char* const* data, long long begin, long long end);
  Entry entry = nullptr;
  int64_t outer = 1;             ///< the outermost loop's size
  int64_t per_outer = 1;         ///< output elements per step of it
  bool single_loop = false;      ///< true when the outermost loop is also the innermost
  bool from_disk_cache = false;
  std::string compiler;  ///< e.g. "g++ 12.2.0"
};
/// Compiles and loads; RuntimeError with the compiler's messages if it fails.
CppKernel load_cpp_kernel(const std::string& source, const std::string& name);
/// True when the host compiler can be run here (TINY_FUSION_CXX, else the one the library was
/// built with); `why` says why not.
bool cpp_compiler_available(std::string& why);
/// The compiler's name and version, as backend() prints it.
std::string cpp_compiler_name();

}  // namespace tiny::detail::fusion
