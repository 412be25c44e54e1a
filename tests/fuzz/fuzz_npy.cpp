// fuzz_npy: the NumPy reader load_npy (tiny/data.h), with and without a memory map, and
// memmap() of the same bytes as raw float32, on arbitrary bytes. A file it accepts must give a
// tensor whose elements lie inside its storage and can all be read; anything else must be the
// library's error.
#include "fuzz_util.h"
#include "tiny/data.h"

namespace {

void check(const tiny::Tensor& t) {
  const size_t end = size_t(t.storage_offset()) * t.element_size() + t.nbytes();
  fuzz::require(t.is_contiguous() && end <= t.storage()->nbytes(),
                "the tensor reaches past its storage");
  fuzz::accepted([&] { (void)t.to(tiny::kFloat64).tolist(); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string path = fuzz::write_file(bytes, size, ".npy");
  tiny::Tensor t;
  if (fuzz::accepted([&] { t = tiny::load_npy(path, /*mmap=*/false); })) check(t);
  if (fuzz::accepted([&] { t = tiny::load_npy(path, /*mmap=*/true); })) check(t);
  if (fuzz::accepted([&] { t = tiny::memmap(path, tiny::kFloat32); })) check(t);
  if (fuzz::accepted([&] { t = tiny::memmap(path, tiny::kBool); })) check(t);
  return 0;
}
