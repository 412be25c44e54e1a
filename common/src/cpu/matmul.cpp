// cpu/matmul.cpp: matrix products on the CPU, through OpenBLAS or the library's own
// cache-blocked loops (set_matmul_backend chooses), and the choice itself.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <vector>

#include "../internal.h"
#include "cpu.h"
#include "tiny/ops.h"

#ifdef TINY_HAS_OPENBLAS
#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#endif

namespace tiny {

namespace detail::cpu {

namespace {

std::atomic<MatmulBackend> g_backend{MatmulBackend::Blas};

// A matrix in memory: element (i, j) is at data[i * rs + j * cs].
template <typename T> struct MatrixRef {
  const T* data;
  int64_t rs, cs;
  T operator()(int64_t i, int64_t j) const { return data[i * rs + j * cs]; }
};

// Copies a rows x cols matrix into `buffer` in row-major order and points `m` at the copy.
template <typename T>
void pack_rows(MatrixRef<T>& m, int64_t rows, int64_t cols, std::vector<T>& buffer) {
  buffer.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buffer[i * cols + j] = m(i, j);
  m = {buffer.data(), cols, 1};
}

// C (M x N, row-major, contiguous) = A (M x K) @ B (K x N), or C += A @ B when `accumulate`,
// with cache blocking: a block of B's rows stays in cache while every row of A's block streams
// past it, and the innermost loop runs along a contiguous row of B and C, which the compiler
// vectorises.
template <typename T>
void gemm_blocked(int64_t M, int64_t N, int64_t K, MatrixRef<T> A, MatrixRef<T> B, T* C,
                  bool accumulate = false) {
  if (!accumulate) std::fill(C, C + M * N, T(0));
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
// OpenBLAS picks its kernels when it loads, from the processor's family and model. A processor
// newer than the OpenBLAS build (Debian 12's 0.3.21 does not know Emerald Rapids, model 207)
// gets its generic fallback, the Prescott kernels: SSE3 only, several times slower, and summing
// in another order, so that a chapter's losses differ from PyTorch's in the last printed digit.
// Where that happened and the processor has AVX2 (with FMA) or AVX-512, the kernels are picked
// again for what it has, the way OPENBLAS_CORETYPE picks them: Haswell or SkylakeX. A core type
// the user set is left alone, and so is an OpenBLAS without run-time kernel choice (the two
// functions are looked up, not linked). This runs while the program starts, before any product.
bool repick_generic_openblas_kernels() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return false;
  if (std::strcmp(openblas_get_corename(), "Prescott") != 0) return false;
  const char* core = nullptr;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    core = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    core = "Haswell";
#endif
  using Hook = void (*)();
  const auto quit = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Hook>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (core == nullptr || quit == nullptr || init == nullptr) return false;
  // gotoblas_dynamic_init reads OPENBLAS_CORETYPE; the variable is removed again afterwards, so
  // that the program's environment (and its children's) stays as it was.
  setenv("OPENBLAS_CORETYPE", core, 1);
  quit();
  init();
  unsetenv("OPENBLAS_CORETYPE");
  return true;
}
[[maybe_unused]] const bool kOpenBlasKernelsRepicked = repick_generic_openblas_kernels();

// A BLAS reads a matrix either row by row or column by column (detail::blas_layout); anything
// else is copied into rows first.
template <typename T>
bool blas_layout(MatrixRef<T> m, int64_t rows, int64_t cols, CBLAS_TRANSPOSE& trans, int64_t& ld) {
  const auto layout = detail::blas_layout(rows, cols, m.rs, m.cs);
  if (!layout) return false;
  trans = layout->transposed ? CblasTrans : CblasNoTrans;
  ld = layout->ld;
  return true;
}

template <typename T>
void gemm_blas(int64_t M, int64_t N, int64_t K, MatrixRef<T> A, MatrixRef<T> B, T* C,
               bool accumulate = false) {
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
  const T beta = accumulate ? T(1) : T(0);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A.data, lda, B.data, ldb, beta, C, N);
  else cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, 1.0, A.data, lda, B.data, ldb, beta, C, N);
}
#endif

// A dimension of size 1 is never stepped along, so its stride may be anything; give it the value
// a row-major layout would have, which a BLAS accepts.
template <typename T>
void normalize_strides(int64_t M, int64_t N, int64_t K, MatrixRef<T>& A, MatrixRef<T>& B) {
  if (M == 1) A.rs = K * A.cs;
  if (K == 1) {
    A.cs = 1;
    B.rs = N * B.cs;
  }
  if (N == 1) B.cs = 1;
}

// C = A @ B (or C += A @ B when `accumulate`) in float32 or float64, by whichever implementation
// is selected.
template <typename T>
void gemm_kernel(int64_t M, int64_t N, int64_t K, MatrixRef<T> A, MatrixRef<T> B, T* C,
                 bool accumulate) {
#ifdef TINY_HAS_OPENBLAS
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (g_backend.load() == MatmulBackend::Blas) return gemm_blas(M, N, K, A, B, C, accumulate);
  }
#endif
  gemm_blocked(M, N, K, A, B, C, accumulate);
}

// One matrix product into contiguous C.
template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, MatrixRef<T> A, MatrixRef<T> B, T* C) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    std::fill(C, C + M * N, T(0));
    return;
  }
  normalize_strides(M, N, K, A, B);
  gemm_kernel(M, N, K, A, B, C, false);
}

// The 16-bit floats have no BLAS routine, so their products run through sgemm one panel of K at
// a time: the panel's columns of A and rows of B are converted to float32 (exact), multiplied
// into a float32 accumulator, and the accumulator is rounded into the output once, after the
// last panel. That is PyTorch's and the hardware's rule (accumulate in float32, round once), and
// it keeps the scratch memory to two panels and one float32 output, where converting the whole
// operands first would copy both of them. The panel width is a measured choice: with panels of
// 256 to 2048, 2048 x 2048 products ran at 0.9 to 1.0 times float32's speed, none clearly ahead
// (sgemm packs its operands into its own blocks anyway), so the narrowest is kept: it needs the
// least scratch, and more of a freshly converted panel is still in cache when sgemm reads it.
constexpr int64_t kPanel = 256;

// The float32 scratch of one 16-bit matmul call, reused by every batch element: a panel of A
// (M x kPanel), a panel of B (kPanel x N) and the accumulator (M x N). It comes from the
// caching allocator, so it is counted as temporaries and a second call finds it in the cache.
struct Scratch16 {
  Tensor a, b, c;
  Scratch16(int64_t M, int64_t N, int64_t K) {
    const int64_t kp = std::min(K, kPanel);
    a = empty({M * kp}, kFloat32);
    b = empty({kp * N}, kFloat32);
    c = empty({M * N}, kFloat32);
  }
};

// Converts the rows x cols block of `m` that starts at (r0, c0) into `buf` and returns it as a
// float32 matrix. The block keeps the orientation of its source (rows stay rows when the source
// is row-major, columns stay columns when it is column-major), so every conversion runs along
// contiguous memory, and a BLAS reads either orientation; other layouts go element by element.
template <typename T>
MatrixRef<float> convert_block(MatrixRef<T> m, int64_t r0, int64_t c0, int64_t rows, int64_t cols,
                               float* buf) {
  const T* p = m.data + r0 * m.rs + c0 * m.cs;
  if (m.cs == 1) {
    if (m.rs == cols) convert_row(buf, p, rows * cols);  // the block is one contiguous run
    else
      for (int64_t i = 0; i < rows; ++i) convert_row(buf + i * cols, p + i * m.rs, cols);
    return {buf, cols, 1};
  }
  if (m.rs == 1) {
    for (int64_t j = 0; j < cols; ++j) convert_row(buf + j * rows, p + j * m.cs, rows);
    return {buf, 1, rows};
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buf[i * cols + j] = float(p[i * m.rs + j * m.cs]);
  return {buf, cols, 1};
}

// One product of 16-bit matrices into contiguous C, panel by panel as explained above.
template <typename T>
void gemm_16bit(int64_t M, int64_t N, int64_t K, MatrixRef<T> A, MatrixRef<T> B, T* C,
                Scratch16& scratch) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    std::fill(C, C + M * N, T(0.0f));
    return;
  }
  normalize_strides(M, N, K, A, B);
  float* acc = scratch.c.data<float>();
  for (int64_t k0 = 0; k0 < K; k0 += kPanel) {
    const int64_t kp = std::min(K - k0, kPanel);
    const MatrixRef<float> a = convert_block(A, 0, k0, M, kp, scratch.a.data<float>());
    const MatrixRef<float> b = convert_block(B, k0, 0, kp, N, scratch.b.data<float>());
    gemm_kernel(M, N, kp, a, b, acc, k0 > 0);
  }
  convert_row(C, acc, M * N);
}

}  // namespace

// out (..., M, N, contiguous) = a (..., M, K) @ b (..., K, N), batch dimensions equal (any
// strides, so an expanded operand is read in place); the 16-bit floats are multiplied in float32
// and rounded once at the end (gemm_16bit).
void matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t nd = a.dim();
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const Shape batch(a.shape().begin(), a.shape().end() - 2);
  const int64_t nbatch = shape_numel(batch);
  dispatch_dtype(a.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw not_implemented_for("addmm_impl_cpu_", kBool);
    } else {
      constexpr bool k16bit = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
      std::optional<Scratch16> scratch;
      if constexpr (k16bit) scratch.emplace(M, N, K);
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* pc = out.data<T>();
      std::vector<int64_t> idx(batch.size(), 0);
      for (int64_t bi = 0; bi < nbatch; ++bi) {
        int64_t oa = 0, ob = 0;
        for (size_t d = 0; d < batch.size(); ++d) {
          oa += idx[d] * a.strides()[d];
          ob += idx[d] * b.strides()[d];
        }
        const MatrixRef<T> A{pa + oa, a.stride(nd - 2), a.stride(nd - 1)},
            B{pb + ob, b.stride(nd - 2), b.stride(nd - 1)};
        if constexpr (k16bit) gemm_16bit<T>(M, N, K, A, B, pc + bi * M * N, *scratch);
        else gemm<T>(M, N, K, A, B, pc + bi * M * N);
        for (size_t d = batch.size(); d-- > 0;) {  // next batch index, odometer style
          if (++idx[d] < batch[d]) break;
          idx[d] = 0;
        }
      }
    }
  });
}

}  // namespace detail::cpu

using detail::cpu::g_backend;

void set_matmul_backend(MatmulBackend backend) { g_backend.store(backend); }

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

}  // namespace tiny
