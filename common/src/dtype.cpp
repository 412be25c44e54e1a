// dtype.cpp: names, sizes and promotion of the element types.
#include "tiny/dtype.h"

namespace tiny {

size_t element_size(DType dtype) {
  switch (dtype) {
#define TINY_DTYPE_SIZE(NAME, CPP, STR, LEGACY, RANK) \
  case DType::NAME: return sizeof(CPP);
    TINY_FORALL_DTYPES(TINY_DTYPE_SIZE)
#undef TINY_DTYPE_SIZE
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
#define TINY_DTYPE_NAME(NAME, CPP, STR, LEGACY, RANK) \
  case DType::NAME: return STR;
    TINY_FORALL_DTYPES(TINY_DTYPE_NAME)
#undef TINY_DTYPE_NAME
  }
  return "?";
}

const char* dtype_legacy_name(DType dtype) {
  switch (dtype) {
#define TINY_DTYPE_LEGACY(NAME, CPP, STR, LEGACY, RANK) \
  case DType::NAME: return LEGACY;
    TINY_FORALL_DTYPES(TINY_DTYPE_LEGACY)
#undef TINY_DTYPE_LEGACY
  }
  return "?";
}

bool is_floating(DType d) {
  return d == kFloat32 || d == kFloat64 || d == kFloat16 || d == kBFloat16;
}

bool is_integral(DType d) {
  return d == kUInt8 || d == kInt8 || d == kInt16 || d == kInt32 || d == kInt64;
}

namespace {
int promotion_rank(DType dtype) {
  switch (dtype) {
#define TINY_DTYPE_RANK(NAME, CPP, STR, LEGACY, RANK) \
  case DType::NAME: return RANK;
    TINY_FORALL_DTYPES(TINY_DTYPE_RANK)
#undef TINY_DTYPE_RANK
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const int ra = promotion_rank(a), rb = promotion_rank(b);
  // Two different types of one rank hold values the other cannot: uint8 and int8 (the top half
  // of one, the negatives of the other) meet in int16; float16 and bfloat16 (precision against
  // range) meet in float32.
  if (ra == rb) return is_floating(a) ? kFloat32 : kInt16;
  // Otherwise the types form a chain, and the result is the higher of the two.
  return ra > rb ? a : b;
}

FloatFormat float_format(DType dtype) {
  switch (dtype) {
    case DType::Float32: return kFormatFloat32;
    case DType::Float64: return FloatFormat{"float64", 11, 52, Specials::IEEE};
    case DType::Float16: return kFormatFloat16;
    case DType::BFloat16: return kFormatBFloat16;
    default: break;
  }
  // PyTorch's text names 'torch.finfo' where one would expect the dtype; it is kept word for
  // word, so that the message is the one a search finds.
  throw TypeError(
      "torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
      "'torch.finfo'");
}

FInfo finfo(DType dtype) { return float_format(dtype).info(); }

std::ostream& operator<<(std::ostream& os, DType dtype) {
  return os << "torch." << dtype_name(dtype);
}

}  // namespace tiny
