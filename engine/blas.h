// The one door to BLAS. Only engine/blas.cpp includes <cblas.h>; everything above
// speaks in MatrixSpans, so a different GEMM backend is a one-file change.
#pragma once

#include "engine/function_ref.h"
#include "engine/tensor.h"

namespace ordo::blas {

// c [m,n] = alpha * a [m,k] * b^T + beta * c, with b given as [n,k] (PyTorch's
// Linear weight layout [out, in], and K in Q K^T). Strided views are fine.
void gemm_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha = 1.0f,
             float beta = 0.0f);

// Work on a block of a product's output right after it is written, by the thread that
// wrote it, while it is in cache (a bias, an activation): `block` is the output's
// columns [first, first + block.cols()), all rows.
using Epilogue = FunctionRef<void(MatrixRef block, Index first)>;

// c = a b^T as above, then epilogue(block, first) over blocks that cover c once.
void gemm_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, Epilogue epilogue);

// c [m,n] = alpha * a [m,k] * b [k,n] + beta * c (A V in attention).
void gemm_nn(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha = 1.0f,
             float beta = 0.0f);

// Runs task(first, count, part) over parts that cover [0, count) once, one per thread
// (part in [0, max_parts())), when count items of work_per_item multiply-adds each are
// worth waking the threads for; otherwise task(0, count, 0) on the calling thread.
// Called from inside a task, it runs on the calling thread alone.
void parallel_for(Index count, Index work_per_item, FunctionRef<void(Index first, Index count, int part)> task);

// The most parts parallel_for may use now: the threads set by set_num_threads.
int max_parts();

// Starts the thread pool (which also makes OpenBLAS single-threaded) unless it runs
// already. Products do this themselves when first needed; a caller that sizes its
// buffers up front (Decoder::start) calls it so that no later product allocates.
void prepare();

// Threads one product may use, in OpenBLAS's GEMMs and in ordo's own matrix-vector
// kernels alike; n <= 0 keeps the default (every core).
void set_num_threads(int n);

}  // namespace ordo::blas
