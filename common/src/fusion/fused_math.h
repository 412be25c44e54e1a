// fused_math.h: the source text of the fused kernels' math functions.
#pragma once

namespace tiny::detail {

// The contents of common/src/fusion/fused_math.inc: tiny_expf, tiny_erff, tiny_geluf, tiny_tanhf
// and tiny_logf as plain, vectorisable C++ that includes nothing. The code generator pastes it,
// inside a namespace, in front of a kernel that calls them. CMake embeds the file's text when it
// configures (CMakeLists.txt), so the library needs no source tree at run time.
const char* fused_math_source();

// The contents of tiny/config.h and tiny/float_formats.h, one after the other, without the
// include between them: the float16 and bfloat16 conversions a generated C++ kernel calls,
// pasted into it so that it includes only the standard library (embedded the same way).
const char* float_formats_source();

}  // namespace tiny::detail
