// factories.cpp: tensors made from nothing (empty, zeros, ones, full, arange, eye) or from
// numbers (tensor, scalar_tensor), each on the device asked for.
#include <cmath>

#include "backend.h"
#include "internal.h"
#include "tiny/ops.h"
#include "tiny/tensor.h"

namespace tiny {

// ---- creation ---------------------------------------------------------------------------------

Tensor empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape)
    if (s < 0)
      throw RuntimeError("Trying to create tensor with negative dimension " + std::to_string(s) +
                         ": " + detail::shape_str(shape));
  const int64_t n = shape_numel(shape);
  auto storage = std::make_shared<Storage>(static_cast<size_t>(n) * element_size(dtype), device);
  return Tensor(std::move(storage), dtype, shape, contiguous_strides(shape), 0);
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  // All-zero bits are 0 in every dtype.
  detail::backend(device).zero_bytes(t.data_ptr(), t.nbytes(), device.index);
  return t;
}

Tensor ones(const Shape& shape, DType dtype, Device device) {
  return empty(shape, dtype, device).fill_(1);
}

Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype, Device device) {
  return empty(shape, dtype.value_or(value.default_dtype()), device).fill_(value);
}

Tensor arange(Scalar end, std::optional<DType> dtype, Device device) {
  return arange(0, end, 1, dtype, device);
}

// The values are computed on the host and moved once: for the sizes these are made at, one copy
// beats a kernel per element.
Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype, Device device) {
  const bool any_float = start.kind() == Scalar::Kind::Float || end.kind() == Scalar::Kind::Float ||
                         step.kind() == Scalar::Kind::Float;
  const DType dt = dtype.value_or(any_float ? kFloat32 : kInt64);
  const double b = start.to_double(), e = end.to_double(), s = step.to_double();
  if (s == 0) throw RuntimeError("step must be nonzero");
  if ((s > 0 && e < b) || (s < 0 && e > b))
    throw RuntimeError("upper bound and larger bound inconsistent with step sign");
  const int64_t n = static_cast<int64_t>(std::ceil((e - b) / s));
  Tensor out = empty({n}, dt);
  dispatch_dtype(dt, [&]<typename T>() {
    T* p = out.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = detail::convert<T>(b + static_cast<double>(i) * s);
  });
  return out.to(device);
}

Tensor eye(int64_t n, int64_t m, DType dtype, Device device) {
  if (m < 0) m = n;
  Tensor out = zeros({n, m}, dtype);
  for (int64_t i = 0; i < std::min(n, m); ++i) out.index({i, i}) = 1;
  return out.to(device);
}

Tensor tensor(const NestedList& values, std::optional<DType> dtype, Device device) {
  // First pass: the shape, from the first element at each depth, and the widest kind of number.
  Shape shape;
  for (const NestedList* level = &values; !level->is_leaf();) {
    shape.push_back(static_cast<int64_t>(level->items().size()));
    if (level->items().empty()) break;
    level = &level->items().front();
  }
  Scalar::Kind widest = Scalar::Kind::Bool;
  std::vector<Scalar> flat;
  // Second pass: every list at depth d must have shape[d] items, as torch.tensor demands.
  auto walk = [&](auto&& self, const NestedList& node, size_t depth) -> void {
    if (node.is_leaf()) {
      if (depth != shape.size())
        throw ValueError("expected sequence of length " + std::to_string(shape[depth]) +
                         " at dim " + std::to_string(depth) + " (got a number)");
      flat.push_back(node.leaf());
      widest = std::max(widest, node.leaf().kind());
      return;
    }
    if (depth >= shape.size())
      throw ValueError("too many dimensions: a list where a number was expected at dim " +
                       std::to_string(depth));
    if (static_cast<int64_t>(node.items().size()) != shape[depth])
      throw ValueError("expected sequence of length " + std::to_string(shape[depth]) + " at dim " +
                       std::to_string(depth) + " (got " + std::to_string(node.items().size()) +
                       ")");
    for (const NestedList& item : node.items()) self(self, item, depth + 1);
  };
  walk(walk, values, 0);
  const DType dt = dtype.value_or(widest == Scalar::Kind::Float ? kFloat32
                                  : widest == Scalar::Kind::Int ? kInt64
                                                                : kBool);
  Tensor out = empty(shape, dt);
  dispatch_dtype(dt, [&]<typename T>() {
    T* p = out.data<T>();
    for (size_t i = 0; i < flat.size(); ++i) {
      if (flat[i].kind() == Scalar::Kind::Float) p[i] = detail::convert<T>(flat[i].to_double());
      else p[i] = detail::convert<T>(flat[i].to_int());
    }
  });
  return out.to(device);
}

Tensor scalar_tensor(Scalar s, std::optional<DType> dtype, Device device) {
  const DType dt = dtype.value_or(s.default_dtype());
  Tensor out = empty({}, dt);
  dispatch_dtype(dt, [&]<typename T>() {
    T* p = out.data<T>();
    if (s.kind() == Scalar::Kind::Float) *p = detail::convert<T>(s.to_double());
    else *p = detail::convert<T>(s.to_int());
  });
  return out.to(device);
}

}  // namespace tiny
