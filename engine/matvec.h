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

// *y = alpha * value + beta * *y, BLAS's convention for every kernel's output: beta == 0
// writes y without reading it (y may be uninitialized, or hold a NaN).
inline void store_scaled(float* y, float value, float alpha, float beta) {
  *y = alpha * value + (beta == 0.0f ? 0.0f : beta * *y);
}

// y[r] = alpha * dot(w[r, 0..cols), x) + beta * y[r] for r in [0, rows); row r of w
// starts at w + r * stride. beta == 0 writes y without reading it.
void matvec(const float* w, Index rows, Index cols, Index stride, const float* x, float* y, float alpha, float beta);

// y [m, rows] = alpha * x [m, cols] w^T + beta * y, for a few rows of x (a decode step
// of a small batch): each weight is read from memory once and meets all m rows of x
// while it is in cache, where sgemm would first copy the whole matrix into its packed
// layout. Faster than sgemm up to 64 rows (engine/blas.cpp). Row i of x starts at
// x + i * x_stride, of y at y + i * y_stride.
void small_gemm_nt(const float* x, Index m, Index x_stride, const float* w, Index rows, Index cols, Index stride,
                   float* y, Index y_stride, float alpha, float beta);

// y[c] = alpha * sum_r x[r] * w[r, c] + beta * y[c] for c in [0, cols): a vector times a
// matrix (attention's probabilities times values). beta == 0 writes y without reading it.
void vecmat(const float* x, const float* w, Index rows, Index cols, Index stride, float* y, float alpha, float beta);

}  // namespace ordo::kernels
