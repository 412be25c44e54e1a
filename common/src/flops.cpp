// flops.cpp: the datasheet numbers the napkin math compares against.
#include "tiny/flops.h"

namespace tiny {

double promised_flop_per_sec(const std::string& device, DType dtype) {
  // Dense numbers (no structured sparsity), from NVIDIA's datasheets.
  const bool half = dtype == kBFloat16 || dtype == kFloat16;
  // The H200 is an H100 with more and faster memory (141 GB of HBM3e at 4.8 TB/s): the same
  // tensor cores, the same promises.
  if (device == "H100" || device == "H200") {
    if (half) return 1979e12 / 2;  // the sheet's 1979 assumes 2:4 sparsity
    if (dtype == kFloat32) return 67.5e12;
  } else if (device == "A100") {
    if (half) return 312e12;
    if (dtype == kFloat32) return 19.5e12;
  }
  throw ValueError("no promised FLOP/s for " + device + " in " + dtype_name(dtype));
}

double promised_bytes_per_sec(const std::string& device) {
  // HBM bandwidth from the same datasheets, for the same cards as promised_flop_per_sec: the
  // FLOP/s above are the SXM cards' (the H100 PCIe promises 756 TFLOP/s in bfloat16, not 989.5),
  // so the bandwidths are too.
  if (device == "H100") return 3.35e12;   // H100 SXM, 80 GB of HBM3
  if (device == "H200") return 4.8e12;    // H200 SXM, 141 GB of HBM3e
  if (device == "A100") return 2.039e12;  // A100 SXM, 80 GB of HBM2e
  throw ValueError("no promised bandwidth for " + device);
}

}  // namespace tiny
