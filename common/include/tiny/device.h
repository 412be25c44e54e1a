/// @file device.h
/// @brief Where a tensor's memory lives: the CPU, or a CUDA device.
#pragma once
#include <ostream>
#include <string>

namespace tiny {

/// A device: the CPU, or CUDA device `index`. Every op runs where its inputs are.
struct Device {
  /// The kinds of device.
  enum class Type { CPU, CUDA };
  Type type = Type::CPU;  ///< CPU or CUDA
  int index = 0;          ///< which CUDA device (0 for the CPU)

  /// The CPU.
  static Device cpu() { return Device{Type::CPU, 0}; }
  /// CUDA device `i`.
  static Device cuda(int i = 0) { return Device{Type::CUDA, i}; }
  /// True for the CPU.
  bool is_cpu() const { return type == Type::CPU; }
  /// True for a CUDA device.
  bool is_cuda() const { return type == Type::CUDA; }
  /// "cpu" or "cuda:0", as PyTorch prints devices.
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  /// Devices are equal when type and index are.
  friend bool operator==(const Device& a, const Device& b) {
    return a.type == b.type && a.index == b.index;
  }
};

/// Prints the device as str() does.
inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

namespace cuda {
/// True when this binary was built with CUDA and a driver and device are present.
bool available();
/// Why available() is false ("" when it is true).
std::string unavailable_reason();
/// Number of CUDA devices (0 without CUDA).
int device_count();
/// The name of device `i`, as the driver reports it.
std::string device_name(int i = 0);
/// True when this binary was compiled with the CUDA parts.
bool compiled();
}  // namespace cuda

}  // namespace tiny
