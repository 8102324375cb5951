// The one door to BLAS. Only engine/blas.cpp includes <cblas.h>; everything above
// speaks in MatrixSpans, so a different GEMM backend is a one-file change.
#pragma once

#include "engine/epilogue.h"
#include "engine/tensor.h"
#include "engine/weight_matrix.h"

namespace ordo::blas {

// c [m,n] = alpha * a [m,k] * b^T + beta * c, with b given as [n,k] (PyTorch's
// Linear weight layout [out, in], and K in Q K^T). Strided views are fine.
void gemm_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha = 1.0f,
             float beta = 0.0f);

// c = a b^T as above, then the epilogue (a bias, an activation) on each block of c's
// columns right after it is written, by the thread that wrote it, while it is in cache
// (engine/epilogue.h). Every column gets it once.
void gemm_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, const Epilogue& epilogue);

// c = a b^T with the epilogue, for a weight in any format (engine/weight_matrix.h):
// float32 as above; otherwise one row of a streams b's stored bytes once (converted in
// registers), a few rows meet each block of b's rows converted to float32 in cache, and
// many rows (an encoder, a prefill) run sgemm on blocks of b converted to float32.
void gemm_nt(ConstMatrixRef a, const WeightMatrix& b, MatrixRef c, const Epilogue& epilogue);

// c [m,n] = alpha * a [m,k] * b [k,n] + beta * c (A V in attention).
void gemm_nn(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha = 1.0f,
             float beta = 0.0f);

}  // namespace ordo::blas
