#include "engine/blas.h"

#include <cblas.h>

#include <cassert>

namespace ordo::blas {

namespace {
// OpenBLAS takes int dimensions; every model dimension ordo handles fits easily.
int narrow(Index n) { return static_cast<int>(n); }
}  // namespace

void gemm_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta) {
  assert(a.cols() == b.cols() && c.rows() == a.rows() && c.cols() == b.rows());
  if (c.empty()) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, narrow(c.rows()), narrow(c.cols()),
              narrow(a.cols()), alpha, a.data(), narrow(a.stride()), b.data(),
              narrow(b.stride()), beta, c.data(), narrow(c.stride()));
}

void gemm_nn(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta) {
  assert(a.cols() == b.rows() && c.rows() == a.rows() && c.cols() == b.cols());
  if (c.empty()) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, narrow(c.rows()), narrow(c.cols()),
              narrow(a.cols()), alpha, a.data(), narrow(a.stride()), b.data(),
              narrow(b.stride()), beta, c.data(), narrow(c.stride()));
}

void set_num_threads(int n) {
  if (n > 0) openblas_set_num_threads(n);
}

}  // namespace ordo::blas
