/// @file config.h
/// @brief Build-wide switches: the host/device annotation shared by CPU and CUDA code.
#pragma once

/// Marks a function callable from both host and device code (index math, float conversions).
/// Under nvcc it expands to `__host__ __device__`; in plain C++ it expands to nothing.
#if defined(__CUDACC__)
#define TINY_HD __host__ __device__
#else
#define TINY_HD
#endif
