/// @file ops.h
/// @brief Operations on tensors: elementwise math with broadcasting and type promotion,
/// comparisons, reductions, matmul, triangles.
///
/// Every op takes inputs of any strides (transposed, sliced, expanded) and returns a new
/// contiguous tensor. Operands broadcast as in NumPy and PyTorch; their dtypes promote as
/// PyTorch's do (a Python number does not widen a tensor: int64 * 2 is int64, float16 + 1.5
/// is float16, int64 / 2 is float32). Each op has one entry point, whatever the device: the
/// dispatcher runs the kernel of the inputs' device (op_table.h describes the elementwise ones).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tiny/tensor.h"

namespace tiny {

/// The dtype of `a op b` under PyTorch's promotion rules (dimensioned tensors outrank 0-dim
/// tensors, which outrank plain numbers, unless the lower-ranked operand is of a higher kind:
/// bool < integer < float).
DType result_type(const Tensor& a, const Tensor& b);
/// The dtype of `a op s` for a number s.
DType result_type(const Tensor& a, Scalar s);

// Each elementwise op is a row of the op table (op_table.h) and has three forms, as in PyTorch:
// `add(a, b)` returns a new tensor; `add_out(out, a, b)` writes into `out` (which must have the
// result's shape and a dtype the result can be cast to) and returns it; and the in-place
// method `a.add_(b)` (tensor.h) writes into `a`. In-place and out= forms record no autograd node:
// they refuse a tensor that requires grad while recording is on, and run freely under NoGradGuard
// (an optimizer's step).

// ---- elementwise, binary ------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);  ///< a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);  ///< a - alpha * b
Tensor mul(const Tensor& a, const Tensor& b);                    ///< a * b
Tensor div(const Tensor& a, const Tensor& b);      ///< a / b, true division (integers give float32)
Tensor pow(const Tensor& a, const Tensor& b);      ///< a ** b
Tensor pow(const Tensor& a, Scalar b);             ///< a ** b
Tensor pow(Scalar a, const Tensor& b);             ///< a number to the tensor's powers, 2 ** t
Tensor maximum(const Tensor& a, const Tensor& b);  ///< elementwise max (NaN propagates)
Tensor minimum(const Tensor& a, const Tensor& b);  ///< elementwise min (NaN propagates)
/// start + weight * (end - start), as one fused multiply-add (exactly `end` at weight 1).
Tensor lerp(const Tensor& start, const Tensor& end, Scalar weight);
/// lerp with a tensor of weights (broadcast with start and end).
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
/// a + value * t1 * t2 (Adam's second moment: `v.addcmul_(g, g, 1 - beta2)`).
Tensor addcmul(const Tensor& a, const Tensor& t1, const Tensor& t2, Scalar value = 1);
/// a + value * t1 / t2 (Adam's step: `p.addcdiv_(m, denom, -lr)`); floating dtypes only.
Tensor addcdiv(const Tensor& a, const Tensor& t1, const Tensor& t2, Scalar value = 1);

// ---- elementwise, unary (integers and bool are computed as float32 where the result is) ----
Tensor neg(const Tensor& a);         ///< -a
Tensor abs(const Tensor& a);         ///< |a|
Tensor sqrt(const Tensor& a);        ///< square root
Tensor rsqrt(const Tensor& a);       ///< 1 / sqrt(a)
Tensor exp(const Tensor& a);         ///< e^a
Tensor log(const Tensor& a);         ///< natural logarithm
Tensor log1p(const Tensor& a);       ///< log(1 + a), accurate for small a
Tensor expm1(const Tensor& a);       ///< e^a - 1, accurate for small a
Tensor erf(const Tensor& a);         ///< the error function
Tensor relu(const Tensor& a);        ///< max(a, 0), same dtype
Tensor gelu(const Tensor& a);        ///< a * Phi(a), the exact (erf) form, PyTorch's default
Tensor sigmoid(const Tensor& a);     ///< 1 / (1 + e^-a)
Tensor tanh(const Tensor& a);        ///< hyperbolic tangent
Tensor square(const Tensor& a);      ///< a * a (recorded as PyTorch records it: PowBackward0)
Tensor reciprocal(const Tensor& a);  ///< 1 / a
/// Each element limited to [min, max]; either bound may be left out (not both). NaN stays NaN,
/// and with min > max every element becomes max, as in PyTorch.
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clamp_min(const Tensor& a, Scalar min);  ///< clamp(a, min, nullopt)
Tensor clamp_max(const Tensor& a, Scalar max);  ///< clamp(a, nullopt, max)

// ---- comparisons: bool results ------------------------------------------------------------
Tensor eq(const Tensor& a, const Tensor& b);  ///< a == b
Tensor ne(const Tensor& a, const Tensor& b);  ///< a != b
Tensor lt(const Tensor& a, const Tensor& b);  ///< a < b
Tensor le(const Tensor& a, const Tensor& b);  ///< a <= b
Tensor gt(const Tensor& a, const Tensor& b);  ///< a > b
Tensor ge(const Tensor& a, const Tensor& b);  ///< a >= b
/// Picks a where `condition` is true and b elsewhere; condition must be bool.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

// ---- the out= forms ---------------------------------------------------------------------
Tensor add_out(const Tensor& out, const Tensor& a, const Tensor& b,
               Scalar alpha = 1);  ///< out = a + alpha b
Tensor sub_out(const Tensor& out, const Tensor& a, const Tensor& b,
               Scalar alpha = 1);                                         ///< out = a - alpha b
Tensor mul_out(const Tensor& out, const Tensor& a, const Tensor& b);      ///< out = a * b
Tensor div_out(const Tensor& out, const Tensor& a, const Tensor& b);      ///< out = a / b
Tensor pow_out(const Tensor& out, const Tensor& a, const Tensor& b);      ///< out = a ** b
Tensor pow_out(const Tensor& out, const Tensor& a, Scalar b);             ///< out = a ** b
Tensor maximum_out(const Tensor& out, const Tensor& a, const Tensor& b);  ///< out = maximum(a, b)
Tensor minimum_out(const Tensor& out, const Tensor& a, const Tensor& b);  ///< out = minimum(a, b)
Tensor lerp_out(const Tensor& out, const Tensor& start, const Tensor& end,
                Scalar weight);  ///< out = lerp(...)
Tensor lerp_out(const Tensor& out, const Tensor& start, const Tensor& end,
                const Tensor& weight);  ///< out = lerp(...)
Tensor addcmul_out(const Tensor& out, const Tensor& a, const Tensor& t1, const Tensor& t2,
                   Scalar value = 1);  ///< out = addcmul(...)
Tensor addcdiv_out(const Tensor& out, const Tensor& a, const Tensor& t1, const Tensor& t2,
                   Scalar value = 1);                       ///< out = addcdiv(...)
Tensor neg_out(const Tensor& out, const Tensor& a);         ///< out = -a
Tensor abs_out(const Tensor& out, const Tensor& a);         ///< out = |a|
Tensor sqrt_out(const Tensor& out, const Tensor& a);        ///< out = sqrt(a)
Tensor rsqrt_out(const Tensor& out, const Tensor& a);       ///< out = rsqrt(a)
Tensor exp_out(const Tensor& out, const Tensor& a);         ///< out = exp(a)
Tensor log_out(const Tensor& out, const Tensor& a);         ///< out = log(a)
Tensor log1p_out(const Tensor& out, const Tensor& a);       ///< out = log1p(a)
Tensor expm1_out(const Tensor& out, const Tensor& a);       ///< out = expm1(a)
Tensor erf_out(const Tensor& out, const Tensor& a);         ///< out = erf(a)
Tensor relu_out(const Tensor& out, const Tensor& a);        ///< out = relu(a)
Tensor gelu_out(const Tensor& out, const Tensor& a);        ///< out = gelu(a)
Tensor sigmoid_out(const Tensor& out, const Tensor& a);     ///< out = sigmoid(a)
Tensor tanh_out(const Tensor& out, const Tensor& a);        ///< out = tanh(a)
Tensor square_out(const Tensor& out, const Tensor& a);      ///< out = a * a
Tensor reciprocal_out(const Tensor& out, const Tensor& a);  ///< out = 1 / a
/// out = clamp(a, min, max).
Tensor clamp_out(const Tensor& out, const Tensor& a, std::optional<Scalar> min,
                 std::optional<Scalar> max = std::nullopt);
Tensor eq_out(const Tensor& out, const Tensor& a, const Tensor& b);  ///< out = (a == b)
Tensor ne_out(const Tensor& out, const Tensor& a, const Tensor& b);  ///< out = (a != b)
Tensor lt_out(const Tensor& out, const Tensor& a, const Tensor& b);  ///< out = (a < b)
Tensor le_out(const Tensor& out, const Tensor& a, const Tensor& b);  ///< out = (a <= b)
Tensor gt_out(const Tensor& out, const Tensor& a, const Tensor& b);  ///< out = (a > b)
Tensor ge_out(const Tensor& out, const Tensor& a, const Tensor& b);  ///< out = (a >= b)

// ---- reductions -----------------------------------------------------------------------------
/// Sum of all elements (int64 for integer and bool inputs).
Tensor sum(const Tensor& a);
/// Sum over `dims`; keepdim leaves them as size 1.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
/// Mean of all elements; floating inputs only.
Tensor mean(const Tensor& a);
/// Mean over `dims`.
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
/// Largest element (NaN if any is NaN).
Tensor max(const Tensor& a);
/// The result of max over one dimension: the values and where they were.
struct MaxResult {
  Tensor values;   ///< the largest value along the dimension
  Tensor indices;  ///< int64 index of its first occurrence
};
/// Largest values along `dim`, and their indices.
MaxResult max(const Tensor& a, int64_t dim, bool keepdim = false);

// ---- matrices -------------------------------------------------------------------------------
/// Matrix product with torch.matmul's rules: 1-D @ 1-D is a dot product, 2-D @ 2-D a matrix
/// product, 1-D operands gain and lose a dimension, and leading (batch) dimensions broadcast:
/// (4, 8, 16, 32) @ (32, 2) -> (4, 8, 16, 2). Runs through a BLAS on the CPU.
Tensor matmul(const Tensor& a, const Tensor& b);
/// input + mat1 @ mat2 (torch.addmm with beta = alpha = 1): mat1 (M, K), mat2 (K, N), input
/// broadcastable to (M, N), all of one dtype. One recorded node, AddmmBackward0, which is what a
/// Linear layer with a bias records.
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2);
/// Keeps elements on and above the `diagonal`-th diagonal of the last two dims, zeroes the rest.
Tensor triu(const Tensor& a, int64_t diagonal = 0);
/// Keeps elements on and below the `diagonal`-th diagonal, zeroes the rest.
Tensor tril(const Tensor& a, int64_t diagonal = 0);

/// torch.set_float32_matmul_precision: "highest" (the default) keeps float32 matmuls in full
/// float32; "high" (or "medium") lets a GPU run them on its TF32 tensor cores, which read each
/// input with a 10-bit mantissa and accumulate in float32: several times faster, with float16's
/// precision per product. The CPU path is unaffected. Another word is warned about and changes
/// nothing, as in PyTorch.
void set_float32_matmul_precision(const std::string& precision);
/// The current setting: "highest", "high" or "medium".
std::string float32_matmul_precision();

/// Which implementation tiny::matmul uses on the CPU.
enum class MatmulBackend {
  Blas,    ///< cblas_sgemm / cblas_dgemm from OpenBLAS (when the build found it)
  Blocked  ///< the library's own cache-blocked loops
};
/// Selects the CPU matmul implementation (Blas falls back to Blocked when not built with one).
void set_matmul_backend(MatmulBackend backend);
/// The implementation in use.
MatmulBackend matmul_backend();
/// True when the build found OpenBLAS.
bool blas_available();
/// "OpenBLAS 0.3.21 (pthread, 2 threads)" or "blocked loops (no BLAS found at build time)".
std::string matmul_backend_description();

// ---- comparisons of whole tensors -----------------------------------------------------------
/// True when shapes match and every pair of elements is equal (values compared across dtypes).
bool equal(const Tensor& a, const Tensor& b);
/// True when |a - b| <= atol + rtol * |b| everywhere (and shapes broadcast).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

// ---- operators --------------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b);   ///< add
Tensor operator-(const Tensor& a, const Tensor& b);   ///< sub
Tensor operator*(const Tensor& a, const Tensor& b);   ///< mul
Tensor operator/(const Tensor& a, const Tensor& b);   ///< div
Tensor operator+(const Tensor& a, Scalar b);          ///< add a number
Tensor operator-(const Tensor& a, Scalar b);          ///< subtract a number
Tensor operator*(const Tensor& a, Scalar b);          ///< multiply by a number
Tensor operator/(const Tensor& a, Scalar b);          ///< divide by a number
Tensor operator+(Scalar a, const Tensor& b);          ///< number + tensor
Tensor operator-(Scalar a, const Tensor& b);          ///< number - tensor
Tensor operator*(Scalar a, const Tensor& b);          ///< number * tensor
Tensor operator/(Scalar a, const Tensor& b);          ///< number / tensor
Tensor operator-(const Tensor& a);                    ///< neg
Tensor operator==(const Tensor& a, const Tensor& b);  ///< eq
Tensor operator!=(const Tensor& a, const Tensor& b);  ///< ne
Tensor operator<(const Tensor& a, const Tensor& b);   ///< lt
Tensor operator<=(const Tensor& a, const Tensor& b);  ///< le
Tensor operator>(const Tensor& a, const Tensor& b);   ///< gt
Tensor operator>=(const Tensor& a, const Tensor& b);  ///< ge
Tensor operator==(const Tensor& a, Scalar b);         ///< eq with a number
Tensor operator!=(const Tensor& a, Scalar b);         ///< ne with a number
Tensor operator<(const Tensor& a, Scalar b);          ///< lt with a number
Tensor operator<=(const Tensor& a, Scalar b);         ///< le with a number
Tensor operator>(const Tensor& a, Scalar b);          ///< gt with a number
Tensor operator>=(const Tensor& a, Scalar b);         ///< ge with a number

}  // namespace tiny
