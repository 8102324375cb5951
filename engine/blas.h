// The one door to BLAS. Only engine/blas.cpp includes <cblas.h>; everything above
// speaks in MatrixSpans, so a different GEMM backend is a one-file change.
#pragma once

#include "engine/tensor.h"

namespace ordo::blas {

// c [m,n] = alpha * a [m,k] * b^T + beta * c, with b given as [n,k] (PyTorch's
// Linear weight layout [out, in], and K in Q K^T). Strided views are fine.
void gemm_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha = 1.0f,
             float beta = 0.0f);

// c [m,n] = alpha * a [m,k] * b [k,n] + beta * c (A V in attention).
void gemm_nn(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha = 1.0f,
             float beta = 0.0f);

// Starts the thread pool (which also makes OpenBLAS single-threaded) unless it runs
// already. Products do this themselves when first needed; a caller that sizes its
// buffers up front (Decoder::start) calls it so that no later product allocates.
void prepare();

// Threads one product may use, in OpenBLAS's GEMMs and in ordo's own matrix-vector
// kernels alike; n <= 0 keeps the default (every core).
void set_num_threads(int n);

}  // namespace ordo::blas
