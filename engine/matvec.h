// Matrix-vector products for decoding, where one row per sequence meets a weight
// matrix: the step reads every weight once and does two flops per weight, so its speed
// is the memory bandwidth. OpenBLAS's sgemv reaches about half of it here (10 GB/s of
// 19 per core on the Marian-base output projection); these kernels stream the matrix
// with several independent accumulators per row and reach the bandwidth.
//
// Both are single-threaded; engine/blas.cpp splits large products across threads.
#pragma once

#include "engine/tensor.h"

namespace ordo::kernels {

// y[r] = alpha * dot(w[r, 0..cols), x) + beta * y[r] for r in [0, rows); row r of w
// starts at w + r * stride. beta == 0 writes y without reading it.
void matvec(const float* w, Index rows, Index cols, Index stride, const float* x, float* y, float alpha, float beta);

// y[c] = alpha * sum_r x[r] * w[r, c] + beta * y[c] for c in [0, cols): a vector times a
// matrix (attention's probabilities times values). beta == 0 writes y without reading it.
void vecmat(const float* x, const float* w, Index rows, Index cols, Index stride, float* y, float alpha, float beta);

}  // namespace ordo::kernels
