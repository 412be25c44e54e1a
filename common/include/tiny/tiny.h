/// @file tiny.h
/// @brief Everything: include this one header to use the whole library.
#pragma once
#include "tiny/allocator.h"
#include "tiny/autograd.h"
#include "tiny/csv.h"
#include "tiny/device.h"
#include "tiny/dtype.h"
#include "tiny/einops.h"
#include "tiny/error.h"
#include "tiny/float_formats.h"
#include "tiny/flops.h"
#include "tiny/format.h"
#include "tiny/functional.h"
#include "tiny/ops.h"
#include "tiny/quantize.h"
#include "tiny/random.h"
#include "tiny/tensor.h"
#include "tiny/timing.h"
