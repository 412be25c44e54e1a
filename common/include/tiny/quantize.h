/// @file quantize.h
/// @brief Tensors in the small formats: rounding to fp8 and fp4, and NVFP4's block scaling.
///
/// The 8-bit and 4-bit formats have too few values to use on their own: E2M1 has 15 (-6 to 6).
/// NVFP4 cuts a tensor into blocks of 16 values; each block stores an E4M3 scale that stretches
/// the 15 values to the block's own range, and the whole tensor has one float32 scale on top,
/// so that the block scales fit E4M3's range. Neighbours share a scale; distant values do not.
#pragma once
#include <cstdint>
#include <vector>

#include "tiny/tensor.h"

namespace tiny {

/// `x` (any floating dtype) with every element rounded to `format` and back: float32 values
/// that the format represents exactly (fake quantisation). NaN stays NaN where the format has
/// one (FP4 has none: NaN becomes its largest value, as the CUDA toolkit converts it); values
/// beyond the format's range follow `overflow`. A non-floating `x` raises RuntimeError (PyTorch's
/// "not implemented for").
Tensor round_to_format(const Tensor& x, const FloatFormat& format,
                       Overflow overflow = Overflow::NonFinite);

/// A tensor in NVFP4: E2M1 codes, one E4M3 scale per block of 16, and a float32 tensor scale.
struct NvFp4Tensor {
  Shape shape;                           ///< the original shape
  std::vector<uint8_t> codes;            ///< one E2M1 code (4 bits) per value, unpacked for clarity
  std::vector<uint8_t> block_scales;     ///< one E4M3 pattern per block of kBlock values
  float tensor_scale = 1;                ///< multiplies every block scale
  static constexpr int64_t kBlock = 16;  ///< values per block
  /// Bytes NVFP4 needs: half a byte per value, one per block scale, four for the tensor scale.
  int64_t storage_bytes() const {
    return static_cast<int64_t>(codes.size() + 1) / 2 + static_cast<int64_t>(block_scales.size()) +
           4;
  }
};

/// Quantises `x` to NVFP4. The tensor scale is amax / (6 * 448), so that the largest block scale
/// (block amax / 6) lands at E4M3's maximum; each block's scale is its amax / 6 in those units,
/// rounded to E4M3; each value is divided by its block's decoded scale and rounded to E2M1.
/// Blocks run over the flattened tensor; the last is shorter when numel is not a multiple of 16,
/// and an empty tensor has no blocks (and tensor scale 1, as has an all-zero one). A
/// non-floating `x` raises RuntimeError; NaN or infinity, which E2M1 cannot hold, ValueError.
NvFp4Tensor nvfp4_quantize(const Tensor& x);
/// The float32 tensor an NVFP4 tensor stands for: code value x block scale x tensor scale.
/// The struct's fields are checked against each other first, and any disagreement raises
/// ValueError naming it: a code per element of `shape`, a scale per block of kBlock values,
/// codes below 16, block scales that are non-negative and not NaN in E4M3, and a finite,
/// non-negative tensor scale.
Tensor nvfp4_dequantize(const NvFp4Tensor& q);
/// FP4 with one float32 scale for the whole tensor (amax / 6) and no block scales, to show what
/// the block scales buy; returned dequantised. Raises as nvfp4_quantize does.
Tensor fp4_single_scale(const Tensor& x);

}  // namespace tiny
