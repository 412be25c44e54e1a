// trace.cpp: capturing a graph from the ops a function runs, and deriving its backward graph.
#include <algorithm>
#include <cstdio>

#include "derivatives.h"
#include "fusion/graph.h"
#include "internal.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"

namespace tiny::detail::fusion {

namespace {

bool same_layout(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.strides() == b.strides() &&
         a.storage_offset() == b.storage_offset();
}

// The dtypes a fused kernel computes in: floats (and bool, for comparisons and masks). Integer
// arithmetic has rules of its own (integer pow, wrapping) that the kernels here do not repeat.
bool fusable_compute(DType d) { return is_floating(d) || d == kBool; }
}  // namespace

Tracer*& Tracer::t_active_ref() {
  static thread_local Tracer* active = nullptr;
  return active;
}

Tracer::Tracer(const std::vector<Tensor>& args) : args_(args), previous_(t_active_ref()) {
  t_active_ref() = this;
}

Tracer::~Tracer() { t_active_ref() = previous_; }

Tracer* Tracer::active() { return t_active_ref(); }

int Tracer::push(Value v, const Tensor& t) {
  values_.push_back(std::move(v));
  tensors_.push_back(t);
  by_storage_.emplace(t.storage().get(), static_cast<int>(values_.size()) - 1);
  return static_cast<int>(values_.size()) - 1;
}

void Tracer::on_cast(const Tensor& source, const Tensor& result) {
  if (!failure_.empty()) return;
  // A float converted to an integer type follows x86's rules where it does not fit (see
  // detail::convert); generated code would leave that to the C++ cast, which is undefined there.
  if (is_floating(source.dtype()) && is_integral(result.dtype())) {
    fail(std::string("to(") + dtype_name(result.dtype()) + ") converts " +
         dtype_name(source.dtype()) + " to an integer type, which runs eagerly");
    return;
  }
  Value v;
  v.kind = Value::Kind::Cast;
  v.dtype = result.dtype();
  v.compute = result.dtype();
  v.shape = result.shape();
  v.args[0] = value_of(source, "to");
  if (v.args[0] >= 0) push(v, result);
}

void Tracer::on_where(const Tensor& condition, const Tensor& a, const Tensor& b,
                      const Tensor& result) {
  if (!failure_.empty()) return;
  Value v;
  v.kind = Value::Kind::Where;
  v.dtype = result.dtype();
  v.compute = result.dtype();
  v.shape = result.shape();
  const Tensor* in[3] = {&condition, &a, &b};
  for (int k = 0; k < 3; ++k) {
    v.args[k] = value_of(*in[k], "where");
    if (v.args[k] < 0) return;
  }
  push(v, result);
}

void Tracer::fail(std::string reason) {
  if (failure_.empty()) failure_ = std::move(reason);
}

int Tracer::add_argument(const Tensor& t) {
  args_.push_back(t);
  return value_of(t, "the backward pass");
}

int Tracer::value_of(const Tensor& t, const char* user) {
  // A value the trace made: found by its memory, which no other value shares while the tracer
  // keeps every tensor alive. A view of it (an intermediate's transpose) is not a value.
  auto [first, last] = by_storage_.equal_range(t.storage().get());
  for (auto it = first; it != last; ++it)
    if (same_layout(tensors_[it->second], t)) return it->second;
  // An argument, or a view of one: read in the kernel through that view's strides.
  for (size_t k = 0; k < args_.size(); ++k) {
    const Tensor& a = args_[k];
    if (a.storage() != t.storage() || a.dtype() != t.dtype() || !(a.device() == t.device()))
      continue;
    Value v;
    v.kind = Value::Kind::Input;
    v.arg = static_cast<int>(k);
    v.shape = t.shape();
    v.dtype = t.dtype();
    v.strides = t.strides();
    v.offset = t.storage_offset() - a.storage_offset();
    return push(v, t);
  }
  // A number made while the function ran (x * 0.5's 0.5, scalar_tensor(0.5) called inside it, a
  // derivative formula's 1) is a constant of the kernel, as torch.compile specialises on Python
  // numbers: the next call makes the same number.
  if (is_number(t) && !t.requires_grad()) {
    Value v;
    v.kind = Value::Kind::Constant;
    v.dtype = t.dtype();
    v.constant = t.item();
    return push(v, t);
  }
  std::string made_by;
  if (t.grad_fn()) made_by = ", made by " + t.grad_fn()->name() + ",";
  // Any other 0-dim tensor is one the function captured (a weight it closes over, which may be
  // written or re-bound before the next call, or need a gradient) or computed eagerly (x.max()):
  // a constant would keep the value it had during the trace.
  if (t.dim() == 0) {
    fail(std::string(user) + " uses a 0-dim " + dtype_name(t.dtype()) + " tensor" + made_by +
         " that is not an argument of the function, nor a number it made: one it captured or "
         "computed eagerly (a reduction) may change before the next call, or need a gradient, "
         "so the function runs eagerly; pass the tensor as an argument to fuse it");
    return -1;
  }
  fail(std::string(user) + " uses a " + dtype_name(t.dtype()) + " tensor of shape " +
       shape_str(t.shape()) + made_by +
       " that no captured op made: only op-table ops (elementwise) on the function's inputs "
       "are captured; matmuls, reductions, copies, dtype conversions and views of intermediate "
       "results run eagerly");
  return -1;
}

void Tracer::on_number(const Tensor& t) { numbers_.emplace(t.storage().get(), t); }

bool Tracer::is_number(const Tensor& t) const {
  return t.dim() == 0 && numbers_.count(t.storage().get()) != 0;
}

void Tracer::on_op(const Call& call, const std::array<const Tensor*, 3>& inputs, DType compute,
                   const Tensor& result) {
  if (!failure_.empty()) return;
  const char* name = call.op->info.name;
  if (call.out) {
    fail(std::string(name) + (call.inplace ? "_ (in place)" : " with out=") +
         ": writes into existing memory, which a graph of values cannot express");
    return;
  }
  if (!fusable_compute(compute)) {
    fail(std::string(name) + " computes in " + dtype_name(compute) +
         ": fused kernels compute in floating point (and bool) only");
    return;
  }
  Value v;
  v.kind = Value::Kind::Op;
  v.op = call.op;
  v.kernel = call.kernel ? call.kernel : call.op;
  v.scalars = call.scalars;
  v.compute = compute;
  v.dtype = result.dtype();
  v.shape = result.shape();
  for (int k = 0; k < call.op->info.arity; ++k) {
    v.args[k] = value_of(*inputs[k], name);
    if (v.args[k] < 0) return;
  }
  push(v, result);
}

Graph Tracer::finish(const std::vector<Tensor>& outputs, bool inputs_may_be_outputs) {
  Graph g;
  g.num_args = static_cast<int>(args_.size());
  if (!failure_.empty()) return g;
  std::vector<int> out_ids;
  for (const Tensor& t : outputs) {
    if (!t.defined()) {
      fail("the function returned an undefined tensor");
      return g;
    }
    auto [first, last] = by_storage_.equal_range(t.storage().get());
    int id = -1;
    for (auto it = first; it != last; ++it) {
      const Value::Kind kind = values_[it->second].kind;
      const bool may = kind == Value::Kind::Op || kind == Value::Kind::Cast ||
                       kind == Value::Kind::Where ||
                       (inputs_may_be_outputs && kind == Value::Kind::Input &&
                        values_[it->second].strides == contiguous_strides(t.shape()));
      if (may && same_layout(tensors_[it->second], t)) id = it->second;
    }
    if (id < 0) {
      fail("the function's result was not made by a captured op (it is an input, a view, or "
           "the result of an op that runs eagerly)");
      return g;
    }
    if (!out_ids.empty() && values_[id].shape != g.shape) {
      fail("the outputs have different shapes");
      return g;
    }
    g.shape = values_[id].shape;
    out_ids.push_back(id);
  }
  // Keep only what the outputs need (dead code elimination), renumbered in order.
  std::vector<bool> live(values_.size(), false);
  for (int id : out_ids) live[id] = true;
  for (int id = static_cast<int>(values_.size()) - 1; id >= 0; --id)
    if (live[id])
      for (int a : values_[id].args)
        if (a >= 0) live[a] = true;
  std::vector<int> renumber(values_.size(), -1);
  for (size_t id = 0; id < values_.size(); ++id) {
    if (!live[id]) continue;
    Value v = values_[id];
    for (int& a : v.args)
      if (a >= 0) a = renumber[a];
    renumber[id] = static_cast<int>(g.values.size());
    g.values.push_back(v);
    g.traced_ids.push_back(static_cast<int>(id));
  }
  for (int id : out_ids) g.outputs.push_back(renumber[id]);
  return g;
}

// ---- the graph as text, and its cost ------------------------------------------------------------

std::string Graph::str() const {
  std::string out;
  char line[160];
  for (size_t id = 0; id < values.size(); ++id) {
    const Value& v = values[id];
    std::string what;
    if (v.kind == Value::Kind::Input) {
      what = "input " + std::to_string(v.arg);
      const Strides natural = contiguous_strides(v.shape);
      if (v.strides != natural || v.offset != 0)
        what += " (strides " + shape_str(Shape(v.strides.begin(), v.strides.end())) +
                (v.offset ? ", offset " + std::to_string(v.offset) : std::string()) + ")";
    } else if (v.kind == Value::Kind::Constant) {
      std::snprintf(line, sizeof line, "constant %.17g", v.constant);
      what = line;
    } else if (v.kind == Value::Kind::Cast) {
      what = "to(%" + std::to_string(v.args[0]) + ")";
    } else if (v.kind == Value::Kind::Where) {
      what = "where(%" + std::to_string(v.args[0]) + ", %" + std::to_string(v.args[1]) + ", %" +
             std::to_string(v.args[2]) + ")";
    } else {
      what = std::string(v.op->info.name) + "(";
      for (int k = 0; k < v.op->info.arity; ++k)
        what += (k ? ", %" : "%") + std::to_string(v.args[k]);
      const char* scalars = v.op->info.scalars;
      if (scalars && *scalars) {
        std::snprintf(line, sizeof line, ", %s=%.17g", scalars, v.scalars.a);
        what += line;
      }
      what += ")";
    }
    std::snprintf(line, sizeof line, "%%%zu = %-34s %s %s", id, what.c_str(), dtype_name(v.dtype),
                  shape_str(v.shape).c_str());
    out += line;
    for (size_t k = 0; k < outputs.size(); ++k)
      if (outputs[k] == static_cast<int>(id)) out += "  -> output " + std::to_string(k);
    out += "\n";
  }
  return out;
}

KernelCost Graph::cost(const std::vector<double>& arg_bytes) const {
  // BEGIN SOLUTION ch09 kernel_cost
  // Every op runs once per element of the loop, whatever its own shape: a fused kernel
  // recomputes a broadcast value at each element that reads it. Memory is each argument read
  // once (all of it, however many values read it) and each output written once.
  double elements = 1;
  for (int64_t s : shape) elements *= static_cast<double>(s);
  KernelCost c;
  for (const Value& v : values)
    if (v.kind == Value::Kind::Op) c.flops += v.op->info.flops * elements;
  std::vector<bool> read(arg_bytes.size(), false);
  for (const Value& v : values)
    if (v.kind == Value::Kind::Input && !read[v.arg]) {
      read[v.arg] = true;
      c.bytes += arg_bytes[v.arg];
    }
  for (int id : outputs) c.bytes += elements * static_cast<double>(element_size(values[id].dtype));
  return c;
  // END SOLUTION ch09 kernel_cost
}

// ---- the backward graph -------------------------------------------------------------------------

BackwardGraph backward_graph(Tracer& tracer, const Graph& forward,
                             const std::vector<bool>& needs_grad, std::string& reason) {
  const std::vector<int>& traced = forward.traced_ids;
  // Which forward values lead to an argument that needs a gradient.
  const size_t n = forward.values.size();
  std::vector<bool> leads(n, false);
  for (size_t id = 0; id < n; ++id) {
    const Value& v = forward.values[id];
    if (v.kind == Value::Kind::Input) leads[id] = needs_grad[v.arg];
    for (int a : v.args)
      if (a >= 0 && leads[a]) leads[id] = true;
  }
  // Reverse mode over the values, every gradient at the output's full shape: a broadcast
  // value's gradient is summed down once, at the end, by the tape. That is the same sum as
  // summing at each broadcast, because a local derivative is constant along the dimensions its
  // value was broadcast over.
  const NoGradGuard plain;
  const Tensor out = tracer.tensor_of(traced[forward.outputs.at(0)]);  // a copy: the list grows
  const Tensor seed = ones(out.shape(), out.dtype(), out.device());
  tracer.add_argument(seed);
  std::vector<Tensor> grads(n);
  grads[forward.outputs[0]] = seed;
  for (int id = static_cast<int>(n) - 1; id >= 0 && tracer.failure().empty(); --id) {
    const Value& v = forward.values[id];
    if (!grads[id].defined() || !leads[id]) continue;
    auto accumulate = [&](int arg, const Tensor& g) {
      Tensor& acc = grads[arg];
      acc = acc.defined() ? add(acc, g) : g;
    };
    if (v.kind == Value::Kind::Cast) {  // the gradient passes through (the tape casts it back)
      accumulate(v.args[0], grads[id]);
      continue;
    }
    if (v.kind == Value::Kind::Where) {  // to a where the condition holds, to b elsewhere
      const Tensor cond = tracer.tensor_of(traced[v.args[0]]);
      const Tensor zero = scalar_tensor(0, grads[id].dtype());
      if (leads[v.args[1]]) accumulate(v.args[1], where(cond, grads[id], zero));
      if (leads[v.args[2]]) accumulate(v.args[2], where(cond, zero, grads[id]));
      continue;
    }
    if (v.kind != Value::Kind::Op) continue;
    const Derivative* d = v.op->derivative;
    if (!d) {
      reason = std::string(v.op->info.name) + " has no derivative";
      return {};
    }
    BackwardArgs args;
    args.grad = grads[id];
    for (int k = 0; k < v.op->info.arity; ++k) {
      args.input[k] = tracer.tensor_of(traced[v.args[k]]);  // copies: formulas add values
      args.needs[k] = leads[v.args[k]];
    }
    args.result = tracer.tensor_of(traced[id]);
    args.scalars = v.scalars;
    const std::array<Tensor, 3> g = d->formula(args);
    for (int k = 0; k < v.op->info.arity; ++k)
      if (args.needs[k] && g[k].defined()) accumulate(v.args[k], g[k]);
  }
  // One output per argument with a gradient: the gradient of the value that reads it. An
  // argument read through a view other than itself (a transpose) would need that view's
  // inverse, which this graph does not hold.
  BackwardGraph result;
  std::vector<Tensor> outputs;
  for (size_t k = 0; k < needs_grad.size(); ++k) {
    result.grads.push_back(-1);
    if (!needs_grad[k]) continue;
    int reader = -1;
    for (size_t id = 0; id < n; ++id) {
      const Value& v = forward.values[id];
      if (v.kind != Value::Kind::Input || v.arg != static_cast<int>(k)) continue;
      const Tensor arg = tracer.argument(static_cast<int>(k));
      if (reader >= 0 || v.offset != 0 || v.strides != arg.strides() || v.shape != arg.shape()) {
        reason = "argument " + std::to_string(k) + " is read through more than one view";
        return {};
      }
      reader = static_cast<int>(id);
    }
    if (reader < 0 || !grads[reader].defined()) continue;  // no gradient flows to it
    if (grads[reader].shape() != out.shape()) {
      reason = "the gradient of argument " + std::to_string(k) + " does not have the output's shape";
      return {};
    }
    result.grads.back() = static_cast<int>(outputs.size());
    outputs.push_back(grads[reader]);
  }
  if (!tracer.failure().empty()) {
    reason = tracer.failure();
    return {};
  }
  result.graph = tracer.finish(outputs, /*inputs_may_be_outputs=*/true);
  if (!tracer.failure().empty()) reason = tracer.failure();
  return result;
}

}  // namespace tiny::detail::fusion
