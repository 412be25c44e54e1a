// matmul.cpp: torch.matmul's rules, written once: 1-D operands gain a dimension and lose it
// again, leading dimensions broadcast, and a batch times a single matrix is folded into one big
// matrix product ((4, 8, 16, 32) @ (32, 2) is one (512, 32) @ (32, 2)), which is what a BLAS is
// fastest at. Each product is recorded as the node PyTorch records (DotBackward0, MvBackward0,
// MmBackward0, BmmBackward0, with views around them), so that the graph shows the same names.
// The product itself is the backend's (Backend::matmul: OpenBLAS or the blocked loops on the CPU,
// cuBLAS on a GPU).
#include <algorithm>
#include <atomic>
#include <tuple>
#include <utility>

#include "autograd_internal.h"
#include "backend.h"
#include "capture_internal.h"
#include "dispatch.h"
#include "internal.h"
#include "tiny/ops.h"

namespace tiny {

namespace {

// torch.set_float32_matmul_precision's setting, as an index into kPrecisions.
constexpr const char* kPrecisions[] = {"highest", "high", "medium"};
std::atomic<int> g_precision{0};

std::string mat_shapes(int64_t r1, int64_t c1, int64_t r2, int64_t c2) {
  return "mat1 and mat2 shapes cannot be multiplied (" + std::to_string(r1) + "x" +
         std::to_string(c1) + " and " + std::to_string(r2) + "x" + std::to_string(c2) + ")";
}

// The C++ name of a dtype's element type, which PyTorch's mm prints in its dtype message.
const char* cpp_type_name(DType d) {
  switch (d) {
    case kFloat32: return "float";
    case kFloat64: return "double";
    case kFloat16: return "c10::Half";
    case kBFloat16: return "c10::BFloat16";
    case kInt64: return "long int";
    case kInt32: return "int";
    case kInt16: return "short int";
    case kInt8: return "signed char";
    case kUInt8: return "unsigned char";
    case kBool: return "bool";
  }
  return "unknown";
}

// Checks torch.matmul's requirements, raising PyTorch 2.x's messages; both the plain and the
// recorded paths start here. PyTorch hands each pair of ranks to one kernel (dot, mv, mm or bmm)
// and each kernel checks in its own order and words: the sizes first (dot: the dtypes first),
// then the dtypes, then whether it has code for the dtype at all.
void check_matmul(const Tensor& a, const Tensor& b) {
  if (a.dim() == 0 || b.dim() == 0)
    throw RuntimeError("both arguments to matmul need to be at least 1D, but they are " +
                       std::to_string(a.dim()) + "D and " + std::to_string(b.dim()) + "D");
  const DType da = a.dtype(), db = b.dtype();
  if (a.dim() == 1 && b.dim() == 1) {  // dot
    if (da != db)
      throw RuntimeError(std::string("dot : expected both vectors to have same dtype, but found ") +
                         dtype_legacy_name(da) + " and " + dtype_legacy_name(db));
    if (a.size(0) != b.size(0))
      throw RuntimeError("inconsistent tensor size, expected tensor [" + std::to_string(a.size(0)) +
                         "] and src [" + std::to_string(b.size(0)) +
                         "] to have the same number of elements, but got " +
                         std::to_string(a.size(0)) + " and " + std::to_string(b.size(0)) +
                         " elements respectively");
    if (da == kBool) throw not_implemented_for("dot", da);
    return;
  }
  const int64_t K = a.size(-1), K2 = b.dim() == 1 ? b.size(0) : b.size(-2),
                N = b.dim() == 1 ? 1 : b.size(-1);
  // A batch times a vector is one mv, and a vector or a batch times a matrix one mm, with the
  // batch folded into the rows.
  const int64_t rows = shape_numel(Shape(a.shape().begin(), a.shape().end() - 1));
  if (b.dim() == 1) {  // mv
    if (K != K2)
      throw RuntimeError("size mismatch, got input (" + std::to_string(rows) + "), mat (" +
                         std::to_string(rows) + "x" + std::to_string(K) + "), vec (" +
                         std::to_string(K2) + ")");
    if (da != db)  // mv's result takes the vector's dtype, and addmv names result, mat, vec
      throw RuntimeError(std::string("addmv input tensors must have the same dtype, but got ") +
                         dtype_legacy_name(db) + ", " + dtype_legacy_name(da) + ", and " +
                         dtype_legacy_name(db));
    if (da == kBool) throw not_implemented_for("addmv_impl_cpu", da);
    return;
  }
  if (b.dim() == 2) {  // mm
    if (K != K2) throw RuntimeError("mm: " + mat_shapes(rows, K, K2, N));
    if (da != db)
      throw RuntimeError(std::string("expected m1 and m2 to have the same dtype, but got: ") +
                         cpp_type_name(da) + " != " + cpp_type_name(db));
    if (da == kBool) throw not_implemented_for("addmm_impl_cpu_", da);
    return;
  }
  // bmm: the batch sizes broadcast first (a 1-D or 2-D operand has none), then the inner sizes.
  const Shape batch =
      broadcast_shapes(a.dim() > 2 ? Shape(a.shape().begin(), a.shape().end() - 2) : Shape{},
                       Shape(b.shape().begin(), b.shape().end() - 2));
  if (K != K2) {
    const std::string count = std::to_string(shape_numel(batch));
    throw RuntimeError("Expected size for first two dimensions of batch2 tensor to be: [" + count +
                       ", " + std::to_string(K) + "] but got: [" + count + ", " +
                       std::to_string(K2) + "].");
  }
  if (da != db)
    throw RuntimeError(std::string("expected scalar type ") + dtype_legacy_name(da) +
                       " but found " + dtype_legacy_name(db));
  if (da == kBool) throw not_implemented_for("bmm", da);
}

// x (..., M, K) @ y (..., K, N), batch dimensions equal, on the inputs' backend; counted.
Tensor product_values(const Tensor& x, const Tensor& y) {
  const Device device = x.device();
  Shape shape(x.shape().begin(), x.shape().end() - 1);
  shape.push_back(y.size(-1));
  Tensor out = empty(shape, x.dtype(), device);
  {
    NoGradGuard plain;
    detail::launch(detail::backend(device).matmul, out, x.detach(), y.detach());
  }
  count_op_cost(2.0 * static_cast<double>(out.numel()) * static_cast<double>(x.size(-1)),
                static_cast<double>(x.nbytes() + y.nbytes() + out.nbytes()));
  return out;
}

using detail::SavedTensor;

// A matrix stored transposed (the transpose of a contiguous one, as Linear's weight.t()).
bool stored_transposed(const Tensor& m) {
  return m.dim() == 2 && m.size(0) > 1 && m.size(1) > 1 && m.stride(0) == 1 &&
         m.stride(1) == m.size(0);
}

// What backward of C = A B needs, saved as PyTorch saves it: A only if B needs a gradient (dB =
// A^T dC), B only if A does (dA = dC B^T). Two more products of C's size, which is why a
// backward pass costs about twice the forward.
struct MatrixProductGrad {
  SavedTensor a, b;
  bool ga, gb;  // which inputs need a gradient
  bool at, bt;  // which are stored transposed (2-D only)

  // `b_first`: save B before A, the order a saved-tensor hook sees. PyTorch 2.x's generated
  // nodes keep their inputs in the order of their names, so mm and bmm (self, mat2) keep mat2
  // first, where addmm (mat1, mat2), dot and mv keep theirs in argument order.
  MatrixProductGrad(const char* node, const Tensor& x, const Tensor& y, bool b_first)
      : ga(x.requires_grad()),
        gb(y.requires_grad()),
        at(x.dim() == 2 && y.dim() == 2 && stored_transposed(x)),
        bt(x.dim() == 2 && y.dim() == 2 && stored_transposed(y)) {
    if (b_first && ga) b = SavedTensor(y, node);
    if (gb) a = SavedTensor(x, node);
    if (!b_first && ga) b = SavedTensor(y, node);
  }

  // dA and dB for mm and bmm.
  std::pair<Tensor, Tensor> operator()(const Tensor& g) const {
    Tensor grad_a, grad_b;
    if (at || bt) {
      // The same two products, computed transposed for an input stored transposed, so that its
      // gradient comes out in its own layout, as PyTorch's mm backward does. The transpose's
      // backward then hands AccumulateGrad a contiguous gradient, which it keeps instead of
      // copying (for a Linear layer: one weight's worth of memory less).
      if (ga)
        grad_a = at ? matmul(b.unpack(), g.transpose(-2, -1)).transpose(-2, -1)
                    : matmul(g, b.unpack().transpose(-2, -1));
      if (gb)
        grad_b = bt ? matmul(g.transpose(-2, -1), a.unpack()).transpose(-2, -1)
                    : matmul(a.unpack().transpose(-2, -1), g);
    } else {
      // BEGIN SOLUTION ch03 matmul_backward
      if (ga) grad_a = matmul(g, b.unpack().transpose(-2, -1));
      if (gb) grad_b = matmul(a.unpack().transpose(-2, -1), g);
      // END SOLUTION ch03 matmul_backward
    }
    return {grad_a, grad_b};
  }
};

// One product, recorded as node `name` when an input needs a gradient: a dot (1-D @ 1-D), a
// matrix times a vector (2-D @ 1-D), or a matrix product (2-D @ 2-D or 3-D @ 3-D).
Tensor product(const char* name, const Tensor& a, const Tensor& b) {
  const int64_t da = a.dim(), db = b.dim();
  Tensor out;
  if (da == 1 && db == 1)
    out = product_values(a.detach().unsqueeze(0), b.detach().unsqueeze(1)).view({});
  else if (db == 1) out = product_values(a, b.detach().unsqueeze(1)).view({a.size(0)});
  else out = product_values(a, b);
  if (!detail::should_record({&a, &b})) return out;
  const MatrixProductGrad grads(name, a, b, /*b_first=*/da >= 2 && db >= 2);
  const double flops = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(a.size(-1));
  detail::record(
      out, name, {a, b},
      [grads, da, db](const Tensor& g) {
        Tensor grad_a, grad_b;
        if (da == 1 && db == 1) {  // dot: d(a.b)/da = b
          if (grads.ga) grad_a = mul(g, grads.b.unpack());
          if (grads.gb) grad_b = mul(g, grads.a.unpack());
        } else if (db == 1) {  // mv: dA = outer(dy, b), db = A^T dy
          if (grads.ga) grad_a = mul(g.unsqueeze(1), grads.b.unpack().unsqueeze(0));
          if (grads.gb) grad_b = matmul(grads.a.unpack().transpose(-2, -1), g);
        } else {  // mm, bmm
          std::tie(grad_a, grad_b) = grads(g);
        }
        return std::vector<Tensor>{grad_a, grad_b};
      },
      flops, flops * (grads.ga + grads.gb));
  return out;
}

}  // namespace

Tensor detail::unsafe_view(const Tensor& t, const Shape& shape, const char* node) {
  Tensor out = t.detach().view(shape);
  if (should_record({&t})) {
    const Shape in = t.shape();
    record(
        out, node, {t}, [in](const Tensor& g) { return std::vector<Tensor>{g.reshape(in)}; }, 0,
        0);
  }
  return out;
}

void set_float32_matmul_precision(const std::string& precision) {
  for (int k = 0; k < 3; ++k)
    if (precision == kPrecisions[k]) {
      g_precision.store(k);
      return;
    }
  // PyTorch warns and keeps the setting it had (its message lacks a space, as here).
  warn(precision +
       " is not one of 'highest', 'high', or 'medium'; the currentsetFloat32MatmulPrecision "
       "call has no effect.");
}

std::string float32_matmul_precision() { return kPrecisions[g_precision.load()]; }

namespace {

// PyTorch's rule for when a batch times a matrix or vector becomes one mm or mv over the
// batch's rows (its should_fold): when the smaller operand requires grad (its gradient is then
// one product, not a batch of them summed), or when the batch folds into the rows without a
// copy. `a` @ `b` with one of them 3-D or more and the other 1-D or 2-D; a 2-D first operand
// folds only for its gradient, since its result would need a transposing copy.
bool should_fold(const Tensor& a, const Tensor& b) {
  const bool a_larger = a.dim() >= b.dim();
  const Tensor big = a_larger ? a : b.transpose(-2, -1);
  const int64_t small_dim = a_larger ? b.dim() : a.dim();
  if (big.dim() < 3 || small_dim > 2) return false;
  if ((a_larger ? b : a).requires_grad()) return true;
  if (a.dim() == 2) return false;
  if (big.numel() == 0) return true;
  for (int64_t i = 0; i + 2 < big.dim(); ++i)
    if (big.stride(i) != big.stride(i + 1) * big.size(i + 1)) return false;
  return true;
}

// matmul once its operands are cast and checked: each case computes as PyTorch's matmul does,
// so that the graph has its nodes and keeps its tensors (tests/fixtures/parity/nodes.txt holds
// them for every pair of ranks, with and without each operand requiring grad).
Tensor matmul_checked(const Tensor& a, const Tensor& b) {
  if (a.dim() == 1 && b.dim() == 1) return product("DotBackward0", a, b);
  if (a.dim() == 2 && b.dim() == 1) return product("MvBackward0", a, b);
  if (a.dim() == 1 && b.dim() == 2)
    return detail::unsafe_view(product("MmBackward0", a.unsqueeze(0), b), {b.size(1)},
                               "SqueezeBackward4");
  if (a.dim() == 2 && b.dim() == 2) return product("MmBackward0", a, b);
  if (should_fold(a, b)) {
    // The larger operand's batch becomes rows of one matrix (transposed first when it is the
    // second operand, which turns A B into (B^T A^T)^T).
    const bool transpose = b.dim() > a.dim();
    const Tensor big = transpose ? b.transpose(-2, -1) : a;
    const Tensor small = !transpose ? b : a.dim() == 2 ? a.t() : a;
    Shape out_shape(big.shape().begin(), big.shape().end() - 1);
    // The rows are counted, not inferred: with K = 0, reshape({-1, 0}) is ambiguous.
    const Tensor rows = big.reshape({shape_numel(out_shape), big.size(-1)});
    if (small.dim() == 1)
      return detail::unsafe_view(product("MvBackward0", rows, small), out_shape);
    out_shape.push_back(small.size(1));
    const Tensor out = detail::unsafe_view(product("MmBackward0", rows, small), out_shape);
    return transpose ? out.transpose(-2, -1).contiguous() : out;
  }
  // A batch of one against a larger batch that needs no expanding for its gradient: PyTorch
  // drops the batch of one so that the product folds.
  if (a.dim() == 3 && b.dim() == 3 && a.size(0) != b.size(0)) {
    if (a.size(0) == 1 && a.requires_grad()) return matmul_checked(a.squeeze(0), b);
    if (b.size(0) == 1 && b.requires_grad()) return matmul_checked(a, b.squeeze(0));
  }
  // Batched: broadcast the batch dimensions, then one batched product. A 1-D first operand is
  // one row; a 1-D second operand is one column, added after the batch is flattened.
  const int64_t K = a.size(-1);
  const int64_t M = a.dim() > 1 ? a.size(-2) : 1, N = b.dim() > 1 ? b.size(-1) : 1;
  auto batch_of = [](const Tensor& t) {
    return Shape(t.shape().begin(), t.shape().end() - std::min<int64_t>(t.dim(), 2));
  };
  const Shape batch = broadcast_shapes(batch_of(a), batch_of(b));
  Shape xs = batch, ys = batch, out_shape = batch;
  xs.insert(xs.end(), {M, K});
  ys.insert(ys.end(), {K, N});
  if (a.dim() > 1) out_shape.push_back(M);
  if (b.dim() > 1) out_shape.push_back(N);
  const Tensor y = b.dim() == 1 ? b.unsqueeze(1) : b;
  if (!detail::should_record({&a, &b}))  // the backend reads expanded operands in place
    return product_values(a.expand(xs), y.expand(ys)).view(out_shape);
  // The graph has PyTorch's shape: the batch flattened into one dimension, BmmBackward0.
  const int64_t nb = shape_numel(batch);
  const Tensor x3 = (a.shape() == xs ? a : a.expand(xs)).reshape({nb, M, K});
  if (b.dim() == 1) {
    Shape vs = batch;
    vs.push_back(K);
    const Tensor y3 = b.expand(vs).reshape({nb, K}).unsqueeze(2);
    return detail::unsafe_view(product("BmmBackward0", x3, y3).squeeze(-1), out_shape);
  }
  const Tensor y3 = (b.shape() == ys ? b : b.expand(ys)).reshape({nb, K, N});
  return detail::unsafe_view(product("BmmBackward0", x3, y3), out_shape);
}

}  // namespace

Tensor matmul(const Tensor& input, const Tensor& other) {
  detail::op_device("matmul", {&input, &other});
  // Autocast runs matrix products in its lower precision.
  const Tensor a = detail::autocast(input, detail::kAutocastLowerPrecision);
  const Tensor b = detail::autocast(other, detail::kAutocastLowerPrecision);
  check_matmul(a, b);
  return matmul_checked(a, b);
}

Tensor addmm(const Tensor& input_, const Tensor& mat1_, const Tensor& mat2_) {
  detail::op_device("addmm", {&input_, &mat1_, &mat2_});
  const std::vector<Tensor> cast =
      detail::autocast({&input_, &mat1_, &mat2_}, detail::kAutocastLowerPrecision);
  const Tensor &input = cast[0], &mat1 = cast[1], &mat2 = cast[2];
  // PyTorch 2.x's checks and words (it calls mat1 "self" in the first).
  if (mat1.dim() != 2)
    throw RuntimeError("addmm: self must be a matrix, got " + std::to_string(mat1.dim()) +
                       "-D tensor");
  if (mat2.dim() != 2)
    throw RuntimeError("addmm: mat2 must be a matrix, got " + std::to_string(mat2.dim()) +
                       "-D tensor");
  if (input.dtype() != mat2.dtype())
    throw RuntimeError(std::string("self and mat2 must have the same dtype, but got ") +
                       dtype_legacy_name(input.dtype()) + " and " +
                       dtype_legacy_name(mat2.dtype()));
  if (mat1.dtype() != mat2.dtype())
    throw RuntimeError(std::string("mat1 and mat2 must have the same dtype, but got ") +
                       dtype_legacy_name(mat1.dtype()) + " and " +
                       dtype_legacy_name(mat2.dtype()));
  if (mat1.size(1) != mat2.size(0))
    throw RuntimeError("addmm: " +
                       mat_shapes(mat1.size(0), mat1.size(1), mat2.size(0), mat2.size(1)));
  check_matmul(mat1, mat2);
  const Shape shape = {mat1.size(0), mat2.size(1)};
  (void)input.expand(shape);  // the bias must expand to the product's shape (expand's message)
  Tensor out = product_values(mat1, mat2);
  {
    NoGradGuard plain;
    out.add_(input.detach());
  }
  count_op_cost(static_cast<double>(out.numel()), static_cast<double>(out.nbytes()));
  if (!detail::should_record({&input, &mat1, &mat2})) return out;
  const MatrixProductGrad grads("AddmmBackward0", mat1, mat2, /*b_first=*/false);
  const Shape input_shape = input.shape();
  const bool gi = input.requires_grad();
  const double flops = 2.0 * static_cast<double>(out.numel()) * static_cast<double>(mat1.size(1));
  detail::record(
      out, "AddmmBackward0", {input, mat1, mat2},
      [grads, input_shape, gi](const Tensor& g) {
        // The bias was broadcast over the rows: its gradient sums them back (first, while the
        // products' gradients do not yet take memory).
        const Tensor grad_input = gi ? detail::sum_to(g, input_shape) : Tensor();
        const auto [grad_a, grad_b] = grads(g);
        return std::vector<Tensor>{grad_input, grad_a, grad_b};
      },
      flops + static_cast<double>(out.numel()), flops * (grads.ga + grads.gb));
  return out;
}

}  // namespace tiny
