// matmul.cpp: matrix products (through OpenBLAS, or the library's own blocked loops) and the
// triangle masks.
//
// torch.matmul's shape rules are handled here once: 1-D operands gain a dimension and lose it
// again, leading dimensions broadcast, and a batch times a single matrix is folded into one big
// matrix product ((4, 8, 16, 32) @ (32, 2) is one (512, 32) @ (32, 2)), which is what a BLAS is
// fastest at.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "autograd_internal.h"
#include "cuda_backend.h"
#include "internal.h"
#include "tiny/format.h"
#include "tiny/ops.h"

#ifdef TINY_HAS_OPENBLAS
#include <cblas.h>
#endif

namespace tiny {

namespace {

std::atomic<MatmulBackend> g_backend{MatmulBackend::Blas};
std::atomic<bool> g_allow_tf32{false};  // torch.set_float32_matmul_precision("highest")

// A matrix in memory: element (i, j) is at data[i * rs + j * cs].
template <typename T> struct MatrixRef {
  const T* data;
  int64_t rs, cs;
  T operator()(int64_t i, int64_t j) const { return data[i * rs + j * cs]; }
};

// Copies a rows x cols matrix into `buffer` in row-major order and points `m` at the copy.
template <typename T> void pack_rows(MatrixRef<T>& m, int64_t rows, int64_t cols, std::vector<T>& buffer) {
  buffer.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buffer[i * cols + j] = m(i, j);
  m = {buffer.data(), cols, 1};
}

// C (M x N, row-major, contiguous) = A (M x K) @ B (K x N), with cache blocking: a block of B's
// rows stays in cache while every row of A's block streams past it, and the innermost loop runs
// along a contiguous row of B and C, which the compiler vectorises.
template <typename T>
void gemm_blocked(int64_t M, int64_t N, int64_t K, MatrixRef<T> A, MatrixRef<T> B, T* C) {
  std::fill(C, C + M * N, T(0));
  // Make B row-major so its rows are contiguous (a copy only when it is not already).
  std::vector<T> packed;
  if (B.cs != 1) pack_rows(B, K, N, packed);
  const T* b = B.data;
  const int64_t ldb = B.rs;
  constexpr int64_t kc = 256, nc = 512, mc = 64;
  for (int64_t j0 = 0; j0 < N; j0 += nc) {
    const int64_t j1 = std::min(N, j0 + nc);
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t k1 = std::min(K, k0 + kc);
      for (int64_t i0 = 0; i0 < M; i0 += mc) {
        const int64_t i1 = std::min(M, i0 + mc);
        for (int64_t i = i0; i < i1; ++i) {
          T* c = C + i * N;
          for (int64_t k = k0; k < k1; ++k) {
            const T aik = A(i, k);
            const T* brow = b + k * ldb;
            for (int64_t j = j0; j < j1; ++j) c[j] += aik * brow[j];
          }
        }
      }
    }
  }
}

#ifdef TINY_HAS_OPENBLAS
// A BLAS reads a matrix either row by row or column by column (detail::blas_layout); anything
// else is copied into rows first.
template <typename T> bool blas_layout(MatrixRef<T> m, int64_t rows, int64_t cols,
                                       CBLAS_TRANSPOSE& trans, int64_t& ld) {
  const auto layout = detail::blas_layout(rows, cols, m.rs, m.cs);
  if (!layout) return false;
  trans = layout->transposed ? CblasTrans : CblasNoTrans;
  ld = layout->ld;
  return true;
}

template <typename T>
void gemm_blas(int64_t M, int64_t N, int64_t K, MatrixRef<T> A, MatrixRef<T> B, T* C) {
  CBLAS_TRANSPOSE ta = CblasNoTrans, tb = CblasNoTrans;
  int64_t lda = 0, ldb = 0;
  std::vector<T> a_copy, b_copy;
  if (!blas_layout(A, M, K, ta, lda)) {
    pack_rows(A, M, K, a_copy);
    blas_layout(A, M, K, ta, lda);
  }
  if (!blas_layout(B, K, N, tb, ldb)) {
    pack_rows(B, K, N, b_copy);
    blas_layout(B, K, N, tb, ldb);
  }
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A.data, lda, B.data, ldb, 0.0f, C, N);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, A.data, lda, B.data, ldb, 0.0, C, N);
}
#endif

// One matrix product into contiguous C, by whichever implementation is selected.
template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, MatrixRef<T> A, MatrixRef<T> B, T* C) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    std::fill(C, C + M * N, T(0));
    return;
  }
  // A dimension of size 1 is never stepped along, so its stride may be anything; give it the
  // value a row-major layout would have, which a BLAS accepts.
  if (M == 1) A.rs = K * A.cs;
  if (K == 1) { A.cs = 1; B.rs = N * B.cs; }
  if (N == 1) B.cs = 1;
#ifdef TINY_HAS_OPENBLAS
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (g_backend.load() == MatmulBackend::Blas) return gemm_blas(M, N, K, A, B, C);
  }
#endif
  gemm_blocked(M, N, K, A, B, C);
}

std::string mat_shapes(int64_t r1, int64_t c1, int64_t r2, int64_t c2) {
  return "mat1 and mat2 shapes cannot be multiplied (" + std::to_string(r1) + "x" +
         std::to_string(c1) + " and " + std::to_string(r2) + "x" + std::to_string(c2) + ")";
}

// Batched product of a (..., M, K) and b (..., K, N), batch dimensions already equal.
Tensor batched_matmul(const Tensor& a, const Tensor& b) {
  const int64_t nd = a.dim();
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  Shape out_shape(a.shape().begin(), a.shape().end() - 2);
  const Shape batch = out_shape;
  out_shape.push_back(M);
  out_shape.push_back(N);
  const DType dt = a.dtype();
  if (a.device().is_cuda()) {
    // cuBLAS takes every float type directly (the 16-bit ones accumulate in float32) and any
    // batch whose matrices sit at one stride from each other.
    if (!is_floating(dt))
      throw TypeError(std::string("\"addmm_cuda\" not implemented for '") + dtype_legacy_name(dt) + "'");
    const int64_t nb = shape_numel(batch);
    Tensor out = empty(out_shape, dt, a.device());
    detail::cuda::gemm(out.view({nb, M, N}), a.reshape({nb, M, K}), b.reshape({nb, K, N}));
    return out;
  }
  // The 16-bit floats are multiplied in float32 and rounded once at the end.
  const DType compute = (dt == kFloat16 || dt == kBFloat16) ? kFloat32 : dt;
  const Tensor x = a.to(compute), y = b.to(compute);
  Tensor out = empty(out_shape, compute);
  const int64_t nbatch = shape_numel(batch);
  dispatch_dtype(compute, [&]<typename T>() {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> ||
                  std::is_same_v<T, bool>) {
      throw TypeError("\"addmm_impl_cpu_\" not implemented for '" +
                      std::string(dtype_legacy_name(dtype_of<T>())) + "'");
    } else {
      const T* pa = x.data<T>();
      const T* pb = y.data<T>();
      T* pc = out.data<T>();
      std::vector<int64_t> idx(batch.size(), 0);
      for (int64_t bi = 0; bi < nbatch; ++bi) {
        int64_t oa = 0, ob = 0;
        for (size_t d = 0; d < batch.size(); ++d) {
          oa += idx[d] * x.strides()[d];
          ob += idx[d] * y.strides()[d];
        }
        gemm<T>(M, N, K, {pa + oa, x.stride(nd - 2), x.stride(nd - 1)},
                {pb + ob, y.stride(nd - 2), y.stride(nd - 1)}, pc + bi * M * N);
        for (size_t d = batch.size(); d-- > 0;) {  // next batch index, odometer style
          if (++idx[d] < batch[d]) break;
          idx[d] = 0;
        }
      }
    }
  });
  return out.to(dt);
}

}  // namespace

void set_matmul_backend(MatmulBackend backend) { g_backend.store(backend); }

void set_float32_matmul_precision(const std::string& precision) {
  if (precision == "highest") g_allow_tf32.store(false);
  else if (precision == "high" || precision == "medium") g_allow_tf32.store(true);
  else
    throw RuntimeError("Invalid precision '" + precision +
                       "', expected one of 'highest', 'high', 'medium'");
}

std::string float32_matmul_precision() { return g_allow_tf32.load() ? "high" : "highest"; }
MatmulBackend matmul_backend() { return g_backend.load(); }

bool blas_available() {
#ifdef TINY_HAS_OPENBLAS
  return true;
#else
  return false;
#endif
}

std::string matmul_backend_description() {
#ifdef TINY_HAS_OPENBLAS
  if (g_backend.load() == MatmulBackend::Blas) {
    // The config string starts "OpenBLAS 0.3.21 ..."; keep the name and version.
    std::string config = openblas_get_config();
    const size_t second_space = config.find(' ', config.find(' ') + 1);
    return config.substr(0, second_space) + ", " + openblas_get_corename() + " kernels, " +
           std::to_string(openblas_get_num_threads()) + " threads";
  }
  return "the library's blocked loops (OpenBLAS switched off)";
#else
  return "the library's blocked loops (no OpenBLAS found at build time)";
#endif
}

namespace {

// Checks torch.matmul's requirements, raising PyTorch's messages; both the plain and the recorded
// paths start here.
void check_matmul(const Tensor& a, const Tensor& b) {
  detail::op_device("matmul", {&a, &b});
  if (a.dim() == 0 || b.dim() == 0)
    throw RuntimeError("both arguments to matmul need to be at least 1D, but they are " +
                       std::to_string(a.dim()) + "D and " + std::to_string(b.dim()) + "D");
  if (a.dtype() != b.dtype())
    throw RuntimeError(std::string("expected m1 and m2 to have the same dtype, but got: ") +
                       dtype_name(a.dtype()) + " != " + dtype_name(b.dtype()));
  if (a.dtype() == kBool) throw TypeError("\"addmm_impl_cpu_\" not implemented for 'Bool'");
  if (a.dim() == 1 && b.dim() == 1) {
    if (a.size(0) != b.size(0))
      throw RuntimeError("inconsistent tensor size, expected tensor [" +
                         std::to_string(a.size(0)) + "] and src [" + std::to_string(b.size(0)) +
                         "] to have the same number of elements, but got " +
                         std::to_string(a.size(0)) + " and " + std::to_string(b.size(0)) +
                         " elements respectively");
    return;
  }
  const int64_t K = a.size(-1), K2 = b.dim() == 1 ? b.size(0) : b.size(-2), N = b.dim() == 1 ? 1 : b.size(-1);
  if (K != K2) {
    // A batch times a matrix is folded into one matrix, and PyTorch reports the folded rows.
    const int64_t rows = b.dim() == 2 && a.dim() >= 2 ? a.numel() / std::max<int64_t>(K, 1)
                                                      : (a.dim() == 1 ? 1 : a.size(-2));
    throw RuntimeError(mat_shapes(rows, K, K2, N));
  }
  if (a.dim() > 2 || b.dim() > 2)
    broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - std::min<int64_t>(a.dim(), 2)),
                     Shape(b.shape().begin(), b.shape().end() - std::min<int64_t>(b.dim(), 2)));
}

// The product itself, with torch.matmul's shape rules; records nothing.
Tensor matmul_values(const Tensor& a, const Tensor& b) {
  check_matmul(a, b);
  if (a.dim() == 1 && b.dim() == 1)  // dot product
    return batched_matmul(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  // A 1-D left operand is a row vector, a 1-D right operand a column vector; the added
  // dimension is removed from the result.
  const Tensor x = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor y = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t M = x.size(-2), K = x.size(-1), N = y.size(-1);
  Tensor out;
  if (y.dim() == 2 && x.dim() >= 2) {
    // Fold every leading dimension of x into the rows: one big product.
    Shape out_shape(x.shape().begin(), x.shape().end() - 1);
    out_shape.push_back(N);
    out = batched_matmul(x.reshape({-1, K}), y).view(out_shape);
  } else {
    const Shape batch = broadcast_shapes(Shape(x.shape().begin(), x.shape().end() - 2),
                                         Shape(y.shape().begin(), y.shape().end() - 2));
    Shape xs = batch, ys = batch;
    xs.insert(xs.end(), {M, K});
    ys.insert(ys.end(), {K, N});
    out = batched_matmul(x.expand(xs), y.expand(ys));
  }
  if (a.dim() == 1) out = out.squeeze(-2);
  if (b.dim() == 1) out = out.squeeze(-1);
  return out;
}

using detail::SavedTensor;

// The four products the tape knows, each one node with PyTorch's name. Backward of C = A B is
// dA = dC B^T and dB = A^T dC: two more products of the same size, which is why a backward pass
// costs about twice the forward.
Tensor recorded_product(const char* name, const Tensor& a, const Tensor& b, double flops) {
  Tensor out = matmul_values(a, b);
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  SavedTensor sa(gb ? a : Tensor()), sb(ga ? b : Tensor());
  const int64_t da = a.dim(), db = b.dim();
  detail::record(out, name, {a, b},
                 [sa, sb, ga, gb, da, db](const Tensor& g) {
                   Tensor grad_a, grad_b;
                   if (da == 1 && db == 1) {  // dot: d(a.b)/da = b
                     if (ga) grad_a = mul(g, sb.unpack());
                     if (gb) grad_b = mul(g, sa.unpack());
                   } else if (db == 1) {  // mv: dA = outer(dy, b), db = A^T dy
                     if (ga) grad_a = mul(g.unsqueeze(1), sb.unpack().unsqueeze(0));
                     if (gb) grad_b = matmul_values(sa.unpack().transpose(-2, -1), g);
                   } else {  // mm, bmm
                     // BEGIN SOLUTION ch03 matmul_backward
                     if (ga) grad_a = matmul_values(g, sb.unpack().transpose(-2, -1));
                     if (gb) grad_b = matmul_values(sa.unpack().transpose(-2, -1), g);
                     // END SOLUTION ch03 matmul_backward
                   }
                   return std::vector<Tensor>{grad_a, grad_b};
                 },
                 flops, flops * (ga + gb));
  return out;
}

// A reshape of a fresh product, recorded as PyTorch names it.
Tensor unsafe_view(const Tensor& t, const Shape& shape) {
  Tensor out = t.detach().view(shape);
  if (detail::should_record({&t})) {
    const Shape in = t.shape();
    detail::record(out, "UnsafeViewBackward0", {t},
                   [in](const Tensor& g) { return std::vector<Tensor>{g.reshape(in)}; }, 0, 0);
  }
  return out;
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (!detail::should_record({&a, &b})) return matmul_values(a, b);
  // With gradients, matmul is built from recorded pieces, the way PyTorch builds it, so that
  // the graph shows the same nodes: DotBackward0, MvBackward0, MmBackward0, or a fold into one
  // big MmBackward0 (a batch times a matrix) or a BmmBackward0, followed by UnsafeViewBackward0.
  check_matmul(a, b);
  const int64_t K = a.size(-1);
  if (a.dim() == 1 && b.dim() == 1) return recorded_product("DotBackward0", a, b, 2.0 * K);
  if (a.dim() == 2 && b.dim() == 1) return recorded_product("MvBackward0", a, b, 2.0 * a.size(0) * K);
  if (a.dim() == 1 && b.dim() == 2) return matmul(a.unsqueeze(0), b).squeeze(0);
  const int64_t N = b.size(-1);
  if (a.dim() == 2 && b.dim() == 2) return recorded_product("MmBackward0", a, b, 2.0 * a.size(0) * K * N);
  if (b.dim() == 2) {  // (..., M, K) @ (K, N): fold the batch into the rows
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(N);
    const Tensor rows = a.reshape({-1, K});
    return unsafe_view(recorded_product("MmBackward0", rows, b, 2.0 * rows.size(0) * K * N), out_shape);
  }
  // Batched: broadcast the batch dimensions, flatten them, one batched product.
  const Tensor x = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor y = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t M = x.size(-2);
  const Shape batch = broadcast_shapes(Shape(x.shape().begin(), x.shape().end() - 2),
                                       Shape(y.shape().begin(), y.shape().end() - 2));
  Shape xs = batch, ys = batch, out_shape = batch;
  xs.insert(xs.end(), {M, K});
  ys.insert(ys.end(), {K, y.size(-1)});
  out_shape.insert(out_shape.end(), {M, y.size(-1)});
  const int64_t nb = shape_numel(batch);
  const Tensor x3 = (x.shape() == xs ? x : x.expand(xs)).reshape({nb, M, K});
  const Tensor y3 = (y.shape() == ys ? y : y.expand(ys)).reshape({nb, K, y.size(-1)});
  Tensor out = unsafe_view(recorded_product("BmmBackward0", x3, y3, 2.0 * nb * M * K * y.size(-1)), out_shape);
  if (a.dim() == 1) out = out.squeeze(-2);
  if (b.dim() == 1) out = out.squeeze(-1);
  return out;
}

namespace {
// Zeroes the elements of the last two dims for which drop(row, col) is true.
template <typename Drop> Tensor triangle(const char* op, const Tensor& a, Drop drop) {
  detail::op_device(op, {&a});
  if (a.dim() < 2)
    throw RuntimeError(std::string(op) + ": input tensor must have at least 2 dimensions");
  const int64_t R = a.size(-2), C = a.size(-1);
  if (a.device().is_cuda()) {
    // The mask is small and the same for every matrix: build it on the host, once, and let the
    // GPU select.
    Tensor keep = empty({R, C}, kBool);
    bool* k = keep.data<bool>();
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) k[i * C + j] = !drop(i, j);
    return where(keep.to(a.device()), a, scalar_tensor(0, a.dtype()));
  }
  Tensor out = a.clone();
  const int64_t nmat = R * C == 0 ? 0 : out.numel() / (R * C);
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    T* p = out.data<T>();
    for (int64_t m = 0; m < nmat; ++m)
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j)
          if (drop(i, j)) p[(m * R + i) * C + j] = T(0);
  });
  return out;
}

// The gradient of a masked copy is the same mask applied to the gradient.
Tensor record_triangle(Tensor out, const Tensor& a, const char* name, bool upper, int64_t diagonal) {
  if (detail::should_record({&a}))
    detail::record(out, name, {a},
                   [upper, diagonal](const Tensor& g) {
                     return std::vector<Tensor>{upper ? triu(g, diagonal) : tril(g, diagonal)};
                   },
                   0, 0);
  return out;
}
}  // namespace

Tensor triu(const Tensor& a, int64_t diagonal) {
  return record_triangle(triangle("triu", a.detach(), [diagonal](int64_t i, int64_t j) { return j - i < diagonal; }),
                         a, "TriuBackward0", true, diagonal);
}

Tensor tril(const Tensor& a, int64_t diagonal) {
  return record_triangle(triangle("tril", a.detach(), [diagonal](int64_t i, int64_t j) { return j - i > diagonal; }),
                         a, "TrilBackward0", false, diagonal);
}

}  // namespace tiny
