// What engine/integer_product.cpp's AVX2 path and engine/integer_product_avx512.cpp
// share: the steps after the integer dots, which must be the same instructions on every
// path for the numbers to be.
#pragma once

#include <cstdint>

#include "engine/weight_matrix.h"

namespace ordo::kernels::integer_detail {

// Row r's weight scales as float32 (int4's are F16: the conversion is exact).
void weight_scales(const WeightMatrix& w, Index r, float* out);

// The definition's float steps (engine/integer_product.h) on the dots of one activation
// row and one weight row, eight groups an instruction. Needs AVX2 and FMA: call it from
// those paths only.
float combine_avx2(const std::int32_t* dots, const float* scales, const float* weight_scales, Index groups);

}  // namespace ordo::kernels::integer_detail
