#include "engine/blas.h"

#include <cblas.h>

#include <cassert>

namespace ordo::blas {

namespace {
// OpenBLAS takes int dimensions; every model dimension ordo handles fits easily.
int narrow(Index n) { return static_cast<int>(n); }
}  // namespace

// One row times a matrix is a matrix-vector product. sgemm would first pack the whole
// matrix into its blocked layout, reading and writing every weight once more than the
// product itself does: for a decode step (one row per sequence) that packing was 72%
// of the time. sgemv streams the matrix once.
void gemm_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta) {
  assert(a.cols() == b.cols() && c.rows() == a.rows() && c.cols() == b.rows());
  if (c.empty()) return;
  if (a.rows() == 1) {  // c^T = b a^T
    cblas_sgemv(CblasRowMajor, CblasNoTrans, narrow(b.rows()), narrow(b.cols()), alpha, b.data(),
                narrow(b.stride()), a.data(), 1, beta, c.data(), 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, narrow(c.rows()), narrow(c.cols()),
              narrow(a.cols()), alpha, a.data(), narrow(a.stride()), b.data(),
              narrow(b.stride()), beta, c.data(), narrow(c.stride()));
}

void gemm_nn(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta) {
  assert(a.cols() == b.rows() && c.rows() == a.rows() && c.cols() == b.cols());
  if (c.empty()) return;
  if (a.rows() == 1) {  // c^T = b^T a^T
    cblas_sgemv(CblasRowMajor, CblasTrans, narrow(b.rows()), narrow(b.cols()), alpha, b.data(), narrow(b.stride()),
                a.data(), 1, beta, c.data(), 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, narrow(c.rows()), narrow(c.cols()),
              narrow(a.cols()), alpha, a.data(), narrow(a.stride()), b.data(),
              narrow(b.stride()), beta, c.data(), narrow(c.stride()));
}

void set_num_threads(int n) {
  if (n > 0) openblas_set_num_threads(n);
}

}  // namespace ordo::blas
