// copy.cpp: copies of a tensor's elements: clone, contiguous, copy_ and fill_, conversions to
// another dtype or device, pinned memory, and reading elements back as numbers. Within a device
// the backend's copy kernel converts and relayouts; between devices bytes cross the bus as one
// contiguous block.
#include "autograd_internal.h"
#include "backend.h"
#include "capture_internal.h"
#include "cuda_backend.h"
#include "dispatch.h"
#include "fusion/graph.h"
#include "internal.h"
#include "tiny/format.h"
#include "tiny/ops.h"

namespace tiny {

// ---- Tensor: data -----------------------------------------------------------------------------

Tensor Tensor::clone() const {
  detail::op_device("clone", {this});
  Tensor out = empty(shape_, dtype_, device());
  detail::launch(detail::backend(device()).copy, out, *this);
  return detail::record_copy(out, *this, "CloneBackward0", [](const Tensor& g) { return g; });
}

namespace {

// Copies `src` (already expanded to dst's shape) into `dst` on another device. Bytes cross
// between devices only as one contiguous block; a change of dtype or layout is done on the
// source's side before (so fewer bytes may travel) or on the destination's side after, by the
// ordinary copy kernel.
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  detail::check_capture_device(src.device().is_cpu() ? dst.device() : src.device());
  const Tensor block = src.to(dst.dtype()).contiguous();
  const Tensor landing = dst.is_contiguous() ? dst : empty(dst.shape(), dst.dtype(), dst.device());
  // The host side of the copy decides whether it may be queued (pinned memory only).
  const bool pinned = (block.device().is_cpu() ? block : landing).is_pinned();
  detail::cuda::copy_bytes(landing.data_ptr(), landing.device(), block.data_ptr(), block.device(),
                           block.nbytes(), non_blocking, pinned);
  if (!landing.shares_storage_with(dst))
    detail::launch(detail::backend(dst.device()).copy, dst, landing);
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  if (!defined() || !src.defined()) throw RuntimeError("copy_(): got an undefined tensor");
  const Tensor* sources[] = {&src};
  const bool record = detail::check_inplace_autograd(*this, sources, 1);
  detail::check_no_internal_overlap(*this);
  detail::check_no_partial_overlap(*this, src);
  // The source broadcasts to this tensor's shape, with PyTorch's two messages: sizes that do not
  // broadcast, and a broadcast that would need a bigger destination.
  if (src.shape() != shape_ && broadcast_shapes(shape_, src.shape()) != shape_)
    throw RuntimeError("output with shape " + detail::shape_str(shape_) +
                       " doesn't match the broadcast shape " +
                       detail::shape_str(broadcast_shapes(shape_, src.shape())));
  // The tape's edges are taken before the write: after it, a view's own node is out of date.
  std::vector<Edge> edges;
  if (record) edges = {detail::edge_for(*this), detail::edge_for(src)};
  storage_->bump_version();
  // The kernel reads the source as it is; only a broadcast needs a view of it (of a detached
  // handle, so that the view is not recorded: the copy is, below).
  Tensor source = src.shape() == shape_ ? src : src.detach().expand(shape_);
  // A copy between devices moves bytes over the bus; a 0-dim CPU source into a GPU tensor is a
  // number, which the fill kernel takes by value.
  if (!(device() == src.device()) && !(src.dim() == 0 && src.device().is_cpu())) {
    copy_across_devices(*this, source.detach(), non_blocking);
  } else {
    // If the source's memory overlaps ours where PyTorch lets it (a source that is not dense,
    // such as an expanded or strided view), writing could clobber elements not yet read; copy
    // it aside first so the result is what a reader expects.
    if (source.storage_ == storage_ && numel() > 0 && source.numel() > 0)
      source = source.detach().clone();
    detail::launch(detail::backend(device()).copy, *this, source);
  }
  // The old values get no gradient; the source gets the gradient, on its own device (the tape
  // sums it down to the source's shape and casts it to its dtype).
  if (record)
    detail::rebase_history(
        *this,
        detail::make_node(
            "CopyBackwards", std::move(edges), {*this, src},
            [from = src.device()](const Tensor& g) {
              return std::vector<Tensor>{zeros(g.shape(), g.dtype(), g.device()), g.to(from)};
            },
            0, 0));
  return *this;
}

namespace {

// fill_ and zero_: every element becomes `value`; the tape records node `name` (PyTorch's
// FillBackward2 or ZeroBackward0), through which the old values get no gradient.
Tensor& fill_recorded(Tensor& t, Scalar value, const char* name) {
  detail::op_device("fill_", {&t});
  const bool record = detail::check_inplace_autograd(t, nullptr, 0);
  const Edge old = record ? detail::edge_for(t) : Edge{};
  const Tensor number =
      detail::number_tensor(value, t.dtype());  // a 0-dim CPU tensor: a number to any device
  {
    NoGradGuard plain;  // the write is recorded below, as this op
    // An expanded view (stride 0) reads some elements many times. PyTorch fills it all the same
    // (every write is the same value), where copy_ refuses it; so fill each element it reads
    // once, through the view with those dimensions cut to size 1. (With autograd involved,
    // copy_ decides.)
    Shape once = t.shape();
    for (size_t d = 0; d < once.size(); ++d)
      if (t.strides()[d] == 0) once[d] = std::min<int64_t>(once[d], 1);
    if (once != t.shape() && !t.requires_grad())
      Tensor(t.storage(), t.dtype(), once, t.strides(), t.storage_offset()).copy_(number);
    else t.copy_(number);
  }
  if (record) detail::record_overwrite(t, old, name);
  return t;
}

}  // namespace

Tensor& Tensor::fill_(Scalar value) { return fill_recorded(*this, value, "FillBackward2"); }
Tensor& Tensor::zero_() { return fill_recorded(*this, 0, "ZeroBackward0"); }

Tensor& Tensor::operator=(Scalar value) && { return fill_(value); }
Tensor& Tensor::operator=(const Tensor& src) && { return copy_(src); }

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  detail::op_device("to", {this});
  Tensor out = empty(shape_, dtype, device());
  detail::launch(detail::backend(device()).copy, out, *this);
  if (auto* tracer = detail::fusion::Tracer::active()) tracer->on_cast(*this, out);  // compile()
  if (!is_floating(dtype)) return out;  // integers and bools carry no gradient
  return detail::record_copy(out, *this, "ToCopyBackward0",
                             [](const Tensor& g) { return g; });  // the tape casts back
}

Tensor Tensor::to(Device device, bool non_blocking) const {
  if (device == this->device()) return *this;
  Tensor out = empty(shape_, dtype_, device);
  {
    NoGradGuard plain;  // the move is recorded below as one node
    out.copy_(*this, non_blocking);
  }
  const Device from = this->device();
  return detail::record_copy(out, *this, "ToCopyBackward0",
                             [from](const Tensor& g) { return g.to(from); });
}

Tensor Tensor::pin_memory() const {
  if (is_pinned()) return *this;
  if (!device().is_cpu())
    throw RuntimeError("cannot pin '" + std::string("torch.cuda.") + dtype_legacy_name(dtype_) +
                       "Tensor' only dense CPU tensors can be pinned");
  cuda::require_device(0);
  auto storage = std::make_shared<Storage>(nbytes(), Device::cpu(), /*pinned=*/true);
  Tensor out(std::move(storage), dtype_, shape_, contiguous_strides(shape_), 0);
  detail::launch(detail::backend(Device::cpu()).copy, out, *this);
  return out;
}

double Tensor::item() const {
  if (numel() != 1)
    throw RuntimeError("a Tensor with " + std::to_string(numel()) +
                       " elements cannot be converted to Scalar");
  // Reading a GPU value on the host waits for the work that computes it: a hidden synchronize.
  // (cpu() of a CPU tensor is the tensor itself.)
  detail::op_device("item", {this});
  if (detail::recording())
    throw RuntimeError(
        "item() cannot run while a CPUGraph is capturing: the number would be read once, at "
        "capture, and never again at replay(). Read it after capture() or replay() returns");
  const Tensor host = cpu();
  return dispatch_dtype(dtype_, [&]<typename T>() -> double {
    return static_cast<double>(static_cast<opmath_t<T>>(*static_cast<const T*>(host.data_ptr())));
  });
}

std::vector<double> Tensor::tolist() const {
  detail::op_device("tolist", {this});
  Tensor c = contiguous().to(kFloat64).cpu();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

double Tensor::at(const std::vector<int64_t>& index) const {
  const int64_t position = offset_of(index);
  detail::op_device("at", {this});
  return Tensor(storage_, dtype_, {}, {}, position).item();
}

}  // namespace tiny
