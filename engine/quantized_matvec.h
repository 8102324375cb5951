// The kernels of half-precision weights (engine/weight_matrix.h): a decode step's
// matrix-vector product, reading each stored byte once and converting to float32 in
// registers, and the conversion of rows to float32 that larger products run on (and
// that embedding lookups of any stored format use).
//
// Activations stay float32 and every product accumulates in float32, in the float32
// kernel's order: an F16 or BF16 matrix gives exactly its float32 conversion's numbers.
// Int8 and int4 products quantize the activations and run engine/integer_product.h (so
// does matvec here, for them). Single-threaded; engine/blas.cpp splits them across threads.
#pragma once

#include "engine/kernel_path.h"
#include "engine/weight_matrix.h"

namespace ordo::kernels {

// y[r] = alpha * dot(w[r, :], x) + beta * y[r] for every row r of w (any format). beta
// == 0 writes y without reading it.
void matvec(const WeightMatrix& w, const float* x, float* y, float alpha, float beta);

// matvec on the given path instead of the process's (engine/kernel_path.h), so that a
// test or a benchmark can set the paths side by side in one process (half-precision
// and quantized weights; float32 ones take the process's path). Throws ordo::Error for
// a path wider than widest_kernel_path().
void matvec_on(KernelPath path, const WeightMatrix& w, const float* x, float* y, float alpha, float beta);

// Rows [first, first + count) of w as float32; row i goes to out + i * out_stride.
void dequantize(const WeightMatrix& w, Index first, Index count, float* out, Index out_stride);

}  // namespace ordo::kernels
