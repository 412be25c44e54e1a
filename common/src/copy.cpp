// copy.cpp: copies of a tensor's elements: clone, contiguous, copy_ and fill_, conversions to
// another dtype or device, pinned memory, and reading elements back as numbers. Within a device
// the backend's copy kernel converts and relayouts; between devices bytes cross the bus as one
// contiguous block.
#include "autograd_internal.h"
#include "backend.h"
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
  detail::backend(device()).copy(out, *this);
  return detail::record_view(out, *this, "CloneBackward0", [](const Tensor& g) { return g; });
}

namespace {

// Copies `src` (already expanded to dst's shape) into `dst` on another device. Bytes cross
// between devices only as one contiguous block; a change of dtype or layout is done on the
// source's side before (so fewer bytes may travel) or on the destination's side after, by the
// ordinary copy kernel.
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const Tensor block = src.to(dst.dtype()).contiguous();
  const Tensor landing = dst.is_contiguous() ? dst : empty(dst.shape(), dst.dtype(), dst.device());
  // The host side of the copy decides whether it may be queued (pinned memory only).
  const bool pinned = (block.device().is_cpu() ? block : landing).is_pinned();
  detail::cuda::copy_bytes(landing.data_ptr(), landing.device(), block.data_ptr(), block.device(),
                           block.nbytes(), non_blocking, pinned);
  if (!landing.shares_storage_with(dst)) detail::backend(dst.device()).copy(dst, landing);
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  if (!defined() || !src.defined()) throw RuntimeError("copy_(): got an undefined tensor");
  const Tensor* sources[] = {&src};
  detail::check_inplace_autograd("copy_", *this, sources, 1);
  detail::check_no_internal_overlap(*this);
  // The source broadcasts to this tensor's shape, with PyTorch's two messages: sizes that do not
  // broadcast, and a broadcast that would need a bigger destination.
  if (src.shape() != shape_ && broadcast_shapes(shape_, src.shape()) != shape_)
    throw RuntimeError("output with shape " + detail::shape_str(shape_) +
                       " doesn't match the broadcast shape " +
                       detail::shape_str(broadcast_shapes(shape_, src.shape())));
  storage_->bump_version();
  Tensor source = src.detach().expand(shape_);
  // A copy between devices moves bytes over the bus; a 0-dim CPU source into a GPU tensor is a
  // number, which the fill kernel takes by value.
  if (!(device() == src.device()) && !(src.dim() == 0 && src.device().is_cpu())) {
    copy_across_devices(*this, source, non_blocking);
    return *this;
  }
  // If the source's memory overlaps ours (x.copy_(x.T)), writing could clobber elements not yet
  // read; copy it aside first so the result is what a reader expects.
  if (source.storage_ == storage_ && numel() > 0 && source.numel() > 0) source = source.clone();
  detail::backend(device()).copy(*this, source);
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  detail::op_device("fill_", {this});
  const Tensor number = scalar_tensor(value, dtype_);  // a 0-dim CPU tensor: a number to any device
  // An expanded view (stride 0) reads some elements many times. PyTorch fills it all the same
  // (every write is the same value), where copy_ refuses it; so fill each element it reads once,
  // through the view with those dimensions cut to size 1. (With autograd involved, copy_ decides.)
  Shape once = shape_;
  for (size_t d = 0; d < once.size(); ++d)
    if (strides_[d] == 0) once[d] = std::min<int64_t>(once[d], 1);
  if (once != shape_ && !requires_grad()) {
    Tensor(storage_, dtype_, once, strides_, offset_).copy_(number);
    return *this;
  }
  return copy_(number);
}

Tensor& Tensor::operator=(Scalar value) && { return fill_(value); }
Tensor& Tensor::operator=(const Tensor& src) && { return copy_(src); }

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  detail::op_device("to", {this});
  Tensor out = empty(shape_, dtype, device());
  detail::backend(device()).copy(out, *this);
  if (auto* tracer = detail::fusion::Tracer::active()) tracer->on_cast(*this, out);  // compile()
  if (!is_floating(dtype)) return out;  // integers and bools carry no gradient
  return detail::record_view(out, *this, "ToCopyBackward0",
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
  return detail::record_view(out, *this, "ToCopyBackward0",
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
  detail::backend(Device::cpu()).copy(out, *this);
  return out;
}

double Tensor::item() const {
  if (numel() != 1)
    throw RuntimeError("a Tensor with " + std::to_string(numel()) +
                       " elements cannot be converted to Scalar");
  // Reading a GPU value on the host waits for the work that computes it: a hidden synchronize.
  // (cpu() of a CPU tensor is the tensor itself.)
  detail::op_device("item", {this});
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
