// cuda_absent.cpp: the CUDA queries in a build without nvcc. Everything answers "no device".
#include "tiny/device.h"

namespace tiny::cuda {
bool compiled() { return false; }
bool available() { return false; }
std::string unavailable_reason() {
  return "this build has no CUDA (nvcc was not found, or TINY_CUDA=OFF, at configure time)";
}
int device_count() { return 0; }
std::string device_name(int) { return ""; }
}  // namespace tiny::cuda
