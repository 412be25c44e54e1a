// fuzz_safetensors: load_safetensors (tiny/checkpoint.h) on arbitrary bytes. A file it accepts
// must give tensors whose every element lies inside their storage and can be read (tolist()
// reads them all, which AddressSanitizer watches); anything else must be the library's error.
#include "fuzz_util.h"
#include "tiny/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string path = fuzz::write_file(bytes, size, ".safetensors");
  tiny::TensorFile file;
  if (!fuzz::accepted([&] { file = tiny::load_safetensors(path); })) return 0;
  for (const auto& entry : file.tensors) {
    const std::string& name = entry.first;
    const tiny::Tensor& t = entry.second;
    fuzz::require(t.defined(), "tensor '" + name + "' is undefined");
    const size_t end = size_t(t.storage_offset()) * t.element_size() + t.nbytes();
    fuzz::require(t.is_contiguous() && end <= t.storage()->nbytes(),
                  "tensor '" + name + "' reaches past its storage");
    fuzz::accepted([&] { (void)t.to(tiny::kFloat64).tolist(); });
  }
  return 0;
}
