// dtype.cpp: names, sizes and promotion of the element types.
#include "tiny/dtype.h"

namespace tiny {

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Float16: return 2;
    case DType::BFloat16: return 2;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "?";
}

const char* dtype_legacy_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "Float";
    case DType::Float64: return "Double";
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
    case DType::Int32: return "Int";
    case DType::Int64: return "Long";
    case DType::Bool: return "Bool";
  }
  return "?";
}

bool is_floating(DType d) {
  return d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16;
}

bool is_integral(DType d) { return d == kInt32 || d == kInt64; }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // The two 16-bit floats trade range for precision in opposite directions; neither holds the
  // other, so they meet in float32.
  if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
  // Otherwise the types form a chain, and the result is the higher of the two.
  auto rank = [](DType d) {
    switch (d) {
      case DType::Bool: return 0;
      case DType::Int32: return 1;
      case DType::Int64: return 2;
      case DType::Float16: return 3;
      case DType::BFloat16: return 3;
      case DType::Float32: return 4;
      case DType::Float64: return 5;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

FloatFormat float_format(DType dtype) {
  switch (dtype) {
    case DType::Float32: return kFormatFloat32;
    case DType::Float64: return FloatFormat{"float64", 11, 52, Specials::IEEE};
    case DType::Float16: return kFormatFloat16;
    case DType::BFloat16: return kFormatBFloat16;
    default: break;
  }
  throw TypeError(std::string("torch.finfo() requires a floating point input type. Use "
                              "torch.iinfo to handle '") + dtype_name(dtype) + "'");
}

FInfo finfo(DType dtype) { return float_format(dtype).info(); }

std::ostream& operator<<(std::ostream& os, DType dtype) {
  return os << "torch." << dtype_name(dtype);
}

}  // namespace tiny
