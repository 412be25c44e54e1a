// Chapter 02: storage, strides and views.
//
// A tensor is a block of memory plus a recipe for reading it: a shape, a stride per dimension
// (how many elements to skip to take one step along it) and an offset. Transposes, slices,
// view() and expand() write a new recipe and copy nothing; contiguous() and reshape() copy when
// the recipe cannot be written. This program shows each of these on small tensors and prints
// what it finds.
//
//   make ch02 && ./ch02_views
#include <cstdio>
#include <string>

#include "tiny/tiny.h"

using namespace tiny;

// The shape of a tensor as Python prints a tuple: (3, 4).
static std::string shape_of(const Tensor& t) { return format_tuple(t.shape()); }
static std::string strides_of(const Tensor& t) { return format_tuple(t.strides()); }
static const char* yes_no(bool b) { return b ? "True" : "False"; }

// Part 1: one tensor of twelve numbers, read four ways.
static void twelve_numbers() {
  std::printf("== one block of memory, several ways to read it ==\n");
  //! [strides]
  Tensor x = arange(12.0).reshape({3, 4});
  std::printf("x: shape %s, strides %s, contiguous %s\n", shape_of(x).c_str(),
              strides_of(x).c_str(), yes_no(x.is_contiguous()));

  // The transpose swaps the strides. Nothing moves in memory, so it costs the same at any size,
  // and the two tensors start at the same address.
  Tensor t = x.T();
  std::printf("x.T: shape %s, strides %s, contiguous %s, same memory %s\n", shape_of(t).c_str(),
              strides_of(t).c_str(), yes_no(t.is_contiguous()),
              yes_no(t.data_ptr() == x.data_ptr()));
  //! [strides]

  // A slice is a view that starts further in: row 1 begins 4 elements in, column 1 begins
  // 1 element in and steps by a whole row.
  Tensor row = x[1];
  Tensor col = x.index({Slice{}, 1});
  std::printf("x[1]: offset %lld, strides %s;  x[:, 1]: offset %lld, strides %s\n",
              static_cast<long long>(row.storage_offset()), strides_of(row).c_str(),
              static_cast<long long>(col.storage_offset()), strides_of(col).c_str());

  // Both tensors read the same cells, so a write through one shows in the other.
  //! [write_through]
  t.index({0, 1}) = 100.0;
  std::printf("after t[0, 1] = 100: x[1, 0] = %s\n", repr(x.at({1, 0})).c_str());
  //! [write_through]

  // contiguous() lays the transposed numbers out row by row in new memory.
  Tensor c = t.contiguous();
  std::printf("t.contiguous(): strides %s, same memory %s\n", strides_of(c).c_str(),
              yes_no(c.data_ptr() == x.data_ptr()));

  //! [view_or_reshape]
  // view() only re-reads memory. Reading t row by row means jumping back and forth in x's
  // memory, which no single stride can describe, so view(12) refuses...
  try {
    t.view({12});
  } catch (const RuntimeError& e) {
    const std::string message = e.what();
    std::printf("t.view(12) fails: %s\n", message.substr(0, message.find('.')).c_str());
  }
  // ...while reshape() falls back to a copy when a view is impossible.
  Tensor flat = t.reshape({12});
  std::printf("t.reshape(12) works (it copies when it must): %s\n",
              format_list(flat.slice(0, std::nullopt, 4).tolist()).c_str());
  //! [view_or_reshape]
}

// Part 2: the views of the lecture, on a 2 x 3 tensor, checked for shared storage.
static void shared_storage() {
  std::printf("\n== views share storage; contiguous() does not ==\n");
  Tensor x = tensor({{1., 2, 3}, {4, 5, 6}});
  struct Named {
    const char* expr;
    Tensor view;
  };
  const Named views[] = {{"x[0]", x[0]},
                         {"x[:, 1]", x.index({Slice{}, 1})},
                         {"x.view(3, 2)", x.view({3, 2})},
                         {"x.transpose(1, 0)", x.transpose(1, 0)}};
  for (const auto& [expr, y] : views)
    std::printf("%-18s shape %-7s strides %-7s offset %lld  same storage as x: %s\n", expr,
                shape_of(y).c_str(), strides_of(y).c_str(),
                static_cast<long long>(y.storage_offset()), yes_no(y.shares_storage_with(x)));

  // A write to x shows through every view.
  Tensor y = x.transpose(1, 0);
  x.index({0, 0}) = 100;
  std::printf("after x[0][0] = 100: y[0][0] = %s\n", repr(y.at({0, 0})).c_str());

  std::printf("x.transpose(1, 0).is_contiguous() = %s\n", yes_no(y.is_contiguous()));
  Tensor z = x.transpose(1, 0).contiguous().view({2, 3});
  std::printf("x.transpose(1, 0).contiguous().view(2, 3): same storage as x: %s\n%s\n",
              yes_no(z.shares_storage_with(x)), z.str().c_str());
}

// Part 3: finding an element. Its position in memory is the dot product of its index with the
// strides, plus the offset.
static void index_to_offset() {
  std::printf("\n== where element (r, c) lives ==\n");
  Tensor x = arange(16.0).reshape({4, 4});
  const int64_t r = 1, c = 2;
  //! [offset_of]
  const int64_t offset = x.offset_of({r, c});  // storage_offset + r * stride(0) + c * stride(1)
  //! [offset_of]
  std::printf("4x4 tensor, strides %s: element (%lld, %lld) is at %lld*%lld + %lld*%lld = %lld\n",
              strides_of(x).c_str(), static_cast<long long>(r), static_cast<long long>(c),
              static_cast<long long>(r), static_cast<long long>(x.stride(0)),
              static_cast<long long>(c), static_cast<long long>(x.stride(1)),
              static_cast<long long>(offset));
  const float* memory = static_cast<const float*>(x.storage()->data());
  std::printf("memory[%lld] = %s, x[1, 2] = %s\n", static_cast<long long>(offset),
              repr(memory[offset]).c_str(), repr(x.at({r, c})).c_str());
  // The same element seen through the transpose: the strides swap, so the index does too.
  Tensor t = x.T();
  std::printf("x.T has strides %s: element (2, 1) of x.T is at %lld, the same cell\n",
              strides_of(t).c_str(), static_cast<long long>(t.offset_of({c, r})));
}

// Part 4: a few ops that a language model leans on.
static void a_few_ops() {
  std::printf("\n== elementwise ops, the causal mask, batched matmul ==\n");
  Tensor x = tensor({1, 4, 9});
  std::printf("x = %s\n", x.str().c_str());
  std::printf("x.pow(2) = %s   x.sqrt() = %s\n", x.pow(2).str().c_str(), x.sqrt().str().c_str());
  std::printf("x.rsqrt() = %s\n", x.rsqrt().str().c_str());
  std::printf("x + x = %s   x * 2 = %s   x / 0.5 = %s\n", (x + x).str().c_str(),
              (x * 2).str().c_str(), (x / 0.5).str().c_str());

  // The causal mask: entry (i, j) says whether position i may feed position j. A position may
  // feed itself and later ones (j >= i), never an earlier one, so below the diagonal is zero.
  std::printf("ones(3, 3).triu() =\n%s\n", ones({3, 3}).triu().str().c_str());

  // matmul treats leading dimensions as a batch: every (16, 32) slice of x meets the same w.
  Tensor a = ones({16, 32}), w = ones({32, 2});
  std::printf("(16, 32) @ (32, 2) -> %s\n", shape_of(matmul(a, w)).c_str());
  Tensor batch = ones({4, 8, 16, 32});
  std::printf("(4, 8, 16, 32) @ (32, 2) -> %s\n", shape_of(matmul(batch, w)).c_str());
}

// Part 5: naming the dimensions instead of counting them.
static void named_dimensions() {
  std::printf("\n== einops: say what the dimensions are ==\n");
  Tensor x = ones({2, 3, 4});  // batch seq1 hidden
  Tensor y = ones({2, 3, 4});  // batch seq2 hidden
  Tensor old_way = matmul(x, y.transpose(-2, -1));
  Tensor z = einsum(x, y, "batch seq1 hidden, batch seq2 hidden -> batch seq1 seq2");
  std::printf("x @ y.transpose(-2, -1): %s   einsum: %s   equal: %s\n", shape_of(old_way).c_str(),
              shape_of(z).c_str(), yes_no(equal(old_way, z)));

  Tensor m = reduce(x, "... hidden -> ...", "mean");
  std::printf("reduce(x, \"... hidden -> ...\", \"mean\"): %s   equal to x.mean(-1): %s\n",
              shape_of(m).c_str(), yes_no(equal(m, x.mean({-1}))));

  // Split a hidden dimension into heads, work per head, merge back.
  Tensor h = ones({2, 3, 8});  // batch seq total_hidden
  Tensor w = ones({4, 4});     // hidden1 hidden2
  //! [heads]
  Tensor split = rearrange(h, "... (heads hidden1) -> ... heads hidden1", {{"heads", 2}});
  Tensor mixed = einsum(split, w, "... hidden1, hidden1 hidden2 -> ... hidden2");
  Tensor merged = rearrange(mixed, "... heads hidden2 -> ... (heads hidden2)");
  //! [heads]
  std::printf("split into heads: %s -> einsum with w: %s -> merged: %s\n", shape_of(split).c_str(),
              shape_of(mixed).c_str(), shape_of(merged).c_str());
}

// The figure: which memory cell each view visits, in the order it visits them. offset_of() is
// the index-to-memory map, so the picture is drawn from the library's own answer.
static void write_figure_data(const std::string& dir) {
  Tensor x = arange(12.0).reshape({3, 4});
  CsvFile csv(dir, "ch02_views.csv", {"view", "shape", "strides", "offset", "order", "cell"});
  const std::pair<const char*, Tensor> views[] = {
      {"x", x}, {"x.T", x.T()}, {"x[1]", x[1]}, {"x[:, 1]", x.index({Slice{}, 1})}};
  for (const auto& [name, v] : views) {
    for (int64_t k = 0; k < v.numel(); ++k) {
      // The multi-index of the k-th element in row-major order.
      std::vector<int64_t> idx(v.dim());
      for (int64_t d = v.dim() - 1, rest = k; d >= 0; --d) {
        idx[d] = rest % v.size(d);
        rest /= v.size(d);
      }
      csv.row(name, shape_of(v), strides_of(v), v.storage_offset(), k, v.offset_of(idx));
    }
  }
  std::printf("\nwrote %s\n", csv.path().c_str());
}

int main(int argc, char** argv) {
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    twelve_numbers();
    shared_storage();
    index_to_offset();
    a_few_ops();
    named_dimensions();
    if (csv_dir) write_figure_data(*csv_dir);
  });
}
