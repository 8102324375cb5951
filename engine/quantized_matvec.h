// The kernels of half-precision and quantized weights (engine/weight_matrix.h): a decode
// step's matrix-vector product, reading each stored byte once and converting to float32
// in registers, and the conversion of rows to float32 that larger products run on.
//
// Activations stay float32 and every product accumulates in float32, so a result
// differs from the float product with the dequantized weights only by the order of
// float additions. Single-threaded; engine/blas.cpp splits them across threads.
#pragma once

#include "engine/weight_matrix.h"

namespace ordo::kernels {

// y[r] = alpha * dot(w[r, :], x) + beta * y[r] for every row r of w (any format). beta
// == 0 writes y without reading it.
void matvec(const WeightMatrix& w, const float* x, float* y, float alpha, float beta);

// Rows [first, first + count) of w as float32; row i goes to out + i * out_stride.
void dequantize(const WeightMatrix& w, Index first, Index count, float* out, Index out_stride);

}  // namespace ordo::kernels
