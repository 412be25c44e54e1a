// factories.cpp: tensors made from nothing (empty, zeros, ones, full, arange, eye) or from
// numbers (tensor, scalar_tensor), each on the device asked for.
#include <cmath>
#include <limits>
#include <sstream>

#include "backend.h"
#include "capture_internal.h"
#include "fusion/graph.h"
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
  // The bytes, numel times itemsize, checked as PyTorch checks them: a size that wraps around
  // would get a small block that the fill then overruns. The sizes are multiplied first, in
  // order, so that a 0 after a large size ({1 << 62, 0}) gives no bytes, as in PyTorch.
  int64_t nbytes = 1;
  bool overflow = false;
  for (int64_t s : shape) overflow |= detail::mul_overflows(nbytes, s, &nbytes);
  overflow = overflow || detail::mul_overflows(nbytes, static_cast<int64_t>(element_size(dtype)), &nbytes);
  if (overflow)
    throw RuntimeError("Storage size calculation overflowed with sizes=" + detail::shape_str(shape));
  auto storage = std::make_shared<Storage>(static_cast<size_t>(nbytes), device);
  return Tensor(std::move(storage), dtype, shape, contiguous_strides(shape), 0);
}

namespace {
// Sets every byte of t to zero, on its device.
void zero_fill(const Tensor& t) {
  detail::backend(t.device()).zero_bytes(t.data_ptr(), t.nbytes(), t.device().index);
}
}  // namespace

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  // PyTorch 2.x's zeros checks its sizes itself, in its own words (the other factories: empty's).
  for (int64_t s : shape)
    if (s < 0) throw RuntimeError("zeros: Dimension size must be non-negative.");
  Tensor t = empty(shape, dtype, device);
  // All-zero bits are 0 in every dtype.
  detail::launch(&zero_fill, t);
  return t;
}

namespace {
// A new tensor of `value`, written by the backend's copy: the factory's own write is not an
// in-place modification (a fresh tensor is at version 0, as in PyTorch).
Tensor filled(const Shape& shape, Scalar value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  detail::launch(detail::backend(device).copy, t,
                 detail::number_tensor(value, dtype).expand(shape));
  return t;
}
}  // namespace

Tensor ones(const Shape& shape, DType dtype, Device device) { return filled(shape, 1, dtype, device); }

Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype, Device device) {
  return filled(shape, value, dtype.value_or(value.default_dtype()), device);
}

Tensor arange(Scalar end, std::optional<DType> dtype, Device device) {
  return arange(0, end, 1, dtype, device);
}

namespace {

// A number as PyTorch's messages print a Scalar: integers as integers, floats as a C++ stream
// prints a double ("0.5", "1e-07", "inf").
std::string scalar_str(const Scalar& s) {
  if (s.kind() != Scalar::Kind::Float) return std::to_string(s.to_int());
  std::ostringstream os;
  os << s.to_double();
  return os.str();
}

}  // namespace

const char* detail::convert_type_name(DType dt) {
  switch (dt) {
    case kInt64: return "int64_t";
    case kInt32: return "int";
    case kInt16: return "int16_t";
    case kInt8: return "int8_t";
    case kUInt8: return "uint8_t";
    case kFloat16: return "c10::Half";
    case kBFloat16: return "c10::BFloat16";
    case kFloat64: return "double";
    case kBool: return "bool";
    default: return "float";
  }
}

// The C++ name PyTorch's messages give a dtype when they print its caffe2::TypeMeta.
const char* detail::type_meta_name(DType d) {
  switch (d) {
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Float16: return "c10::Half";
    case DType::BFloat16: return "c10::BFloat16";
    case DType::Int32: return "int";
    case DType::Int64: return "long int";
    case DType::Int16: return "short int";
    case DType::Int8: return "signed char";
    case DType::UInt8: return "unsigned char";
    case DType::Bool: return "bool";
  }
  return "?";
}

namespace {

// A number stored as an element of type T, checked as PyTorch checks a number it stores
// (c10::checked_convert): an integer or float that T cannot hold is its RuntimeError, never a C++
// cast (undefined for a float out of an integer type's range) or a silent wrap. Into a float type
// the number is checked only when `check_floats` is set: full, fill_ and scalar_tensor refuse a
// finite value beyond the type's largest (1e300 for float32; the infinities and NaN pass), where
// torch.tensor([1e300]) stores inf. bool takes any number (nonzero is true).
template <typename T> T number_to(const Scalar& s, const char* type_name, bool check_floats) {
  if constexpr (std::is_same_v<T, bool>) {
    return s.kind() == Scalar::Kind::Float ? s.to_double() != 0 : s.to_int() != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (s.kind() == Scalar::Kind::Float) return truncate_checked<T>(s.to_double(), type_name);
    if constexpr (std::is_unsigned_v<T>) {
      // PyTorch lets a negative integer wrap into an unsigned type, down to -max (uint8 takes -1
      // as 255 and -255 as 1), so that a - b may be computed as a + 255 * b.
      constexpr int64_t kMax = std::numeric_limits<T>::max();
      const int64_t i = s.to_int();
      if (i < -kMax || i > kMax)
        throw RuntimeError(std::string("value cannot be converted to type ") + type_name +
                           " without overflow");
      return static_cast<T>(i);
    }
    // An int64 into a narrower integer: exact as a double wherever it could fit.
    if constexpr (sizeof(T) < sizeof(int64_t))
      return truncate_checked<T>(static_cast<double>(s.to_int()), type_name);
    else return s.to_int();
  } else {
    const double v =
        s.kind() == Scalar::Kind::Float ? s.to_double() : static_cast<double>(s.to_int());
    // finfo(dtype).max of the target type, in double (exact for all four).
    if (check_floats && std::isfinite(v) && std::fabs(v) > finfo(dtype_of<T>()).max)
      throw RuntimeError(std::string("value cannot be converted to type ") + type_name +
                         " without overflow");
    return detail::convert<T>(v);
  }
}

}  // namespace

// The values are computed on the host and moved once: for the sizes these are made at, one copy
// beats a kernel per element.
Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype, Device device) {
  const bool any_float = start.kind() == Scalar::Kind::Float || end.kind() == Scalar::Kind::Float ||
                         step.kind() == Scalar::Kind::Float;
  const DType dt = dtype.value_or(any_float ? kFloat32 : kInt64);
  const double b = start.to_double(), e = end.to_double(), s = step.to_double();
  // PyTorch's checks, in its order; a NaN step fails the first.
  if (!(s > 0 || s < 0)) throw RuntimeError("step must be nonzero");
  if (!std::isfinite(b) || !std::isfinite(e))
    throw RuntimeError("unsupported range: " + scalar_str(start) + " -> " + scalar_str(end));
  if ((s > 0 && e < b) || (s < 0 && e > b))
    throw RuntimeError("upper bound and lower bound inconsistent with step sign");
  // The count as a double first: converting one past int64's range would be undefined.
  const double count = std::ceil((e - b) / s);
  if (!(count >= 0 && count < 0x1p63)) throw RuntimeError("invalid size, possible overflow?");
  const int64_t n = static_cast<int64_t>(count);
  Tensor out = empty({n}, dt);
  {
    const detail::HostScope constant;  // numbers the caller gave
    dispatch_dtype(dt, [&]<typename T>() {
      T* p = out.data<T>();
      for (int64_t i = 0; i < n; ++i) p[i] = detail::convert<T>(b + static_cast<double>(i) * s);
    });
  }
  detail::record_constant(out);
  return out.to(device);
}

Tensor eye(int64_t n, int64_t m, DType dtype, Device device) {
  // -1 is how the declaration says "m omitted"; any other negative size is PyTorch's error.
  if (n < 0) throw RuntimeError("n must be greater or equal to 0, got " + std::to_string(n));
  if (m == -1) m = n;
  if (m < 0) throw RuntimeError("m must be greater or equal to 0, got " + std::to_string(m));
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
  // No numbers at all (tensor({}), tensor({{}, {}})) is float32, PyTorch's default dtype.
  const DType dt = dtype.value_or(flat.empty() || widest == Scalar::Kind::Float ? kFloat32
                                  : widest == Scalar::Kind::Int                 ? kInt64
                                                                                : kBool);
  Tensor out = empty(shape, dt);
  {
    const detail::HostScope constant;  // numbers the caller gave
    dispatch_dtype(dt, [&]<typename T>() {
      T* p = out.data<T>();
      // torch.tensor names the dtype its own way here: "int64", not "int64_t".
      for (size_t i = 0; i < flat.size(); ++i) p[i] = number_to<T>(flat[i], dtype_name(dt), false);
    });
  }
  detail::record_constant(out);
  return out.to(device);
}

Tensor detail::number_tensor(Scalar s, DType dt, bool check_floats) {
  Tensor out = empty({}, dt);
  const HostScope constant;  // a number the library chose: a CPUGraph keeps it as it is
  dispatch_dtype(dt, [&]<typename T>() {
    *out.data<T>() = number_to<T>(s, convert_type_name(dt), check_floats);
  });
  if (auto* tracer = detail::fusion::Tracer::active()) tracer->on_number(out);  // compile()
  return out;
}

Tensor scalar_tensor(Scalar s, std::optional<DType> dtype, Device device) {
  Tensor out = detail::number_tensor(s, dtype.value_or(s.default_dtype()));
  detail::record_constant(out);  // the caller's to change in place
  return out.to(device);
}

}  // namespace tiny
