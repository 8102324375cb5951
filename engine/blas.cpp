#include "engine/blas.h"

#include <cblas.h>
#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <memory>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/function_ref.h"
#include "engine/integer_product.h"
#include "engine/matvec.h"
#include "engine/quantized_matvec.h"
#include "engine/thread_pool.h"

namespace ordo::blas {

namespace {
// OpenBLAS takes int dimensions; every model dimension ordo handles fits easily.
int narrow(Index n) { return static_cast<int>(n); }

// Below this many weights a matrix-vector product is not worth splitting: waking a
// worker costs about as much as streaming 256 KB. GEMMs split above this many
// multiply-adds.
constexpr Index kParallelWeights = Index{1} << 16;
constexpr Index kParallelFlops = Index{1} << 21;
// Activations quantize at about a value a nanosecond (two passes over memory): split
// from 64 K values, when a thread's half takes some 30 us, far more than waking it.
constexpr Index kParallelQuantize = Index{1} << 16;
// Up to this many rows against a large matrix (a decode step: one row per sequence),
// ordo's kernel beats sgemm, whose packing of the matrix costs more than the product.
// Measured on the Marian-base shape, 2 threads: decode 1.4x sgemm's rate at batch 16
// (sgemm spent 38% of the step packing weights), and sgemm wins again only at encoder
// sizes, where the packing is shared by hundreds of rows.
constexpr Index kSmallRows = 64;

// OpenBLAS (0.3.21, Debian 12's) allocates a 128 MB work buffer for each thread that runs
// a product and, when that fails, retries forever (OpenBLAS issue #5289, fixed in 0.3.30):
// under a tight address-space limit (ulimit -v) ordo hung in its first product. So check
// at the first product, before OpenBLAS allocates, that the buffers of every thread fit
// (with some room to spare), and fail with a message instead. The probe is writable, as
// the buffers are: a data limit (ulimit -d) counts only writable private memory, and a
// PROT_NONE probe passed under it while the buffer did not fit. MAP_NORESERVE: the probe
// takes no memory.
constexpr std::size_t kOpenBlasBuffer = std::size_t{128} << 20;
constexpr std::size_t kHeadroom = std::size_t{32} << 20;

void check_room_for_openblas(int threads) {
  const std::size_t bytes = static_cast<std::size_t>(threads) * kOpenBlasBuffer + kHeadroom;
  void* probe = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (probe == MAP_FAILED)
    throw Error("OpenBLAS", "cannot reserve the " + std::to_string(bytes >> 20) + " MB of memory that " +
                                std::to_string(threads) + " thread(s) of products need",
                "is a memory limit (ulimit -v or ulimit -d) set too low? Raise it, or use fewer --threads");
  ::munmap(probe, bytes);
}

// c [1, n] = alpha * a [1, k] b^T + beta * c, rows of b split across the pool's threads
// in blocks of 16 rows (whole cache lines of c), each thread writing its own part.
void matvec(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta, const Epilogue* epilogue) {
  const auto stream = [&](Index first, Index count, int) {
    kernels::matvec(b.data() + first * b.stride(), count, b.cols(), b.stride(), a.data(), c.data() + first, alpha, beta);
    if (epilogue) apply_epilogue(*epilogue, c.col_block(first, count), first);
  };
  const std::shared_ptr<ThreadPool> workers = threads::workers_for(b.rows() * b.cols(), kParallelWeights);
  if (!workers) return stream(0, b.rows(), 0);
  threads::split(*workers, b.rows(), 16, stream);
}

// c [m, n] = alpha * a [m, k] b^T + beta * c for a few rows of a: ordo's kernel reads
// each row of b once for all m rows (sgemm would pack b first), split like matvec.
void small_gemm(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta, const Epilogue* epilogue) {
  const auto stream = [&](Index first, Index count, int) {
    kernels::small_gemm_nt(a.data(), a.rows(), a.stride(), b.data() + first * b.stride(), count, b.cols(), b.stride(),
                           c.data() + first, c.stride(), alpha, beta);
    if (epilogue) apply_epilogue(*epilogue, c.col_block(first, count), first);
  };
  const std::shared_ptr<ThreadPool> workers = threads::workers_for(b.rows() * b.cols(), kParallelWeights);
  if (!workers) return stream(0, b.rows(), 0);
  threads::split(*workers, b.rows(), 48, stream);  // whole blocks of 3 rows, whole cache lines of c
}

// Called on the caller's thread before any sgemm (and before a product is split, so
// that the check never throws on a worker). ordo runs every thread it uses: OpenBLAS is
// made single-threaded before it runs anything, and a product is split across ordo's
// pool instead (engine/thread_pool.h). Two thread pools on the same cores (OpenBLAS's
// idle workers spin for a long while after each GEMM) slowed a 2-thread decode step
// 2-3x. The room check runs once, at the first product, when what else runs is
// allocated already.
void ready_for_openblas() {
  static const bool ready = (openblas_set_num_threads(1), check_room_for_openblas(threads::count()), true);
  (void)ready;
}

void sgemm(CBLAS_TRANSPOSE transpose_b, ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b, narrow(c.rows()), narrow(c.cols()), narrow(a.cols()), alpha,
              a.data(), narrow(a.stride()), b.data(), narrow(b.stride()), beta, c.data(), narrow(c.stride()));
}

// gemm_nt with an optional epilogue.
void multiply_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta, const Epilogue* epilogue) {
  assert(a.cols() == b.cols() && c.rows() == a.rows() && c.cols() == b.rows());
  if (c.empty()) return;
  if (a.rows() == 1) return matvec(a, b, c, alpha, beta, epilogue);
  if (a.rows() <= kSmallRows && b.rows() * b.cols() >= kParallelWeights)
    return small_gemm(a, b, c, alpha, beta, epilogue);
  ready_for_openblas();
  // Threads take slices of b's rows (c's columns): each slice is a whole GEMM.
  const auto slice = [&](Index first, Index count, int) {
    sgemm(CblasTrans, a, b.row_block(first, count), c.col_block(first, count), alpha, beta);
    if (epilogue) apply_epilogue(*epilogue, c.col_block(first, count), first);
  };
  const std::shared_ptr<ThreadPool> workers = threads::workers_for(c.rows() * c.cols() * a.cols(), kParallelFlops);
  if (!workers) return slice(0, b.rows(), 0);
  threads::split(*workers, b.rows(), 16, slice);
}

// int8 and int4 b: the rows of a quantized to int8 once, then integer products
// (engine/integer_product.h), b's rows split across threads as matvec splits them. The
// same definition at every batch size, so a sequence's numbers never depend on its
// batch; faster than float32 from one row (fewer bytes) to thousands (int8 multiply-adds).
void integer_gemm(ConstMatrixRef a, const WeightMatrix& b, MatrixRef c, const Epilogue* epilogue) {
  thread_local kernels::QuantizedActivations buffers;
  // A reference, so that the workers read this thread's buffers: a lambda does not
  // capture a thread_local, and each worker would name its own (empty) one.
  kernels::QuantizedActivations& activations = buffers;
  // Many rows (prefill, the encoder) quantize on every thread too: on the caller alone
  // they were 22% of an int8 product of 512 rows of 2048 columns on AMX, one thread.
  const std::shared_ptr<ThreadPool> quantizers = threads::workers_for(a.rows() * a.cols(), kParallelQuantize);
  activations.quantize(a, b.group(), [&](Index rows, FunctionRef<void(Index, Index)> quantize_rows) {
    if (!quantizers) return quantize_rows(0, rows);
    threads::split(*quantizers, rows, 1, [&](Index first, Index count, int) { quantize_rows(first, first + count); });
  });
  const auto slice = [&](Index first, Index count, int) {
    kernels::integer_product(activations, b, first, count, c.data() + first, c.stride());
    if (epilogue) apply_epilogue(*epilogue, c.col_block(first, count), first);
  };
  const std::shared_ptr<ThreadPool> workers = threads::workers_for(a.rows() * b.rows() * b.cols(), kParallelWeights);
  if (!workers) return slice(0, b.rows(), 0);
  threads::split(*workers, b.rows(), 16, slice);
}

// Rows of a half-precision b converted to float32, per thread, into a
// buffer that grows to the widest block once and is reused by every step. Each product
// then runs the float32 kernel that float32 weights of the same shape run (same
// dispatch, same tiles: blocks are whole units of the thread split), so a stored matrix
// gives exactly the float32 model's numbers on its dequantized weights, at every batch
// size (tests/test_quantized.cpp).
constexpr Index kConvertedRows = 48;     // the small-batch kernel's split unit: whole tiles of 3 rows
constexpr Index kConvertedBlock = 256;   // sgemm's blocks

float* converted_rows(Index count, Index cols) {
  thread_local std::vector<float> buffer;
  const auto size = static_cast<std::size_t>(count * cols);
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

// c [1, n] = a b^T for one row of a, b in a stored format: the kernel reads each stored
// byte once and converts it in registers, split as matvec.
void stored_matvec(ConstMatrixRef a, const WeightMatrix& b, MatrixRef c, const Epilogue* epilogue) {
  const auto stream = [&](Index first, Index count, int) {
    kernels::matvec(b.row_block(first, count), a.data(), c.data() + first, 1.0f, 0.0f);
    if (epilogue) apply_epilogue(*epilogue, c.col_block(first, count), first);
  };
  const std::shared_ptr<ThreadPool> workers = threads::workers_for(b.rows() * b.cols(), kParallelWeights);
  if (!workers) return stream(0, b.rows(), 0);
  threads::split(*workers, b.rows(), 16, stream);
}

// A few rows of a: each block of b's rows is converted once, into cache, where every
// row of a meets it in ordo's small-batch kernel; b's stored bytes are read once.
void stored_small_gemm(ConstMatrixRef a, const WeightMatrix& b, MatrixRef c, const Epilogue* epilogue) {
  const auto stream = [&](Index first, Index count, int) {
    float* block = converted_rows(kConvertedRows, b.cols());
    for (Index r = first; r < first + count; r += kConvertedRows) {
      const Index rows = std::min(kConvertedRows, first + count - r);
      b.dequantize(r, rows, block, b.cols());
      kernels::small_gemm_nt(a.data(), a.rows(), a.stride(), block, rows, b.cols(), b.cols(), c.data() + r, c.stride(),
                             1.0f, 0.0f);
    }
    if (epilogue) apply_epilogue(*epilogue, c.col_block(first, count), first);
  };
  const std::shared_ptr<ThreadPool> workers = threads::workers_for(b.rows() * b.cols(), kParallelWeights);
  if (!workers) return stream(0, b.rows(), 0);
  threads::split(*workers, b.rows(), kConvertedRows, stream);
}

// Many rows of a: sgemm on blocks of b's rows, converted to float32 unless they are.
// Float32 weights take the same blocks, read in place: OpenBLAS's sums depend on how
// the columns of c are split across its calls (random 40 x 344 by 600 x 344 products,
// whole against 256 columns at a time, differed in their last bit on 100 of 180 shapes,
// with its Haswell and its Skylake-X kernels alike), so only the same calls on the same
// values give an F16 or BF16 matrix exactly its float32 conversion's numbers.
void weight_gemm(ConstMatrixRef a, const WeightMatrix& b, MatrixRef c, const Epilogue* epilogue) {
  ready_for_openblas();
  const auto slice = [&](Index first, Index count, int) {
    float* block = b.is_float32() ? nullptr : converted_rows(kConvertedBlock, b.cols());
    for (Index r = first; r < first + count; r += kConvertedBlock) {
      const Index rows = std::min(kConvertedBlock, first + count - r);
      ConstMatrixRef weights(block, rows, b.cols());
      if (b.is_float32())
        weights = b.float32().row_block(r, rows);
      else
        b.dequantize(r, rows, block, b.cols());
      sgemm(CblasTrans, a, weights, c.col_block(r, rows), 1.0f, 0.0f);
    }
    if (epilogue) apply_epilogue(*epilogue, c.col_block(first, count), first);
  };
  const std::shared_ptr<ThreadPool> workers = threads::workers_for(c.rows() * c.cols() * a.cols(), kParallelFlops);
  if (!workers) return slice(0, b.rows(), 0);
  threads::split(*workers, b.rows(), 16, slice);
}
}  // namespace

// One row times a matrix is a matrix-vector product. sgemm would first pack the whole
// matrix into its blocked layout, reading and writing every weight once more than the
// product itself does: for a decode step (one row per sequence) that packing was 72%
// of the time. ordo's own kernel streams the matrix once, at the memory bandwidth
// (engine/matvec.h), which OpenBLAS's sgemv reaches only half of.
void gemm_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta) {
  multiply_nt(a, b, c, alpha, beta, nullptr);
}

void gemm_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, const Epilogue& epilogue) {
  multiply_nt(a, b, c, 1.0f, 0.0f, epilogue.empty() ? nullptr : &epilogue);
}

void gemm_nt(ConstMatrixRef a, const WeightMatrix& b, MatrixRef c, const Epilogue& epilogue) {
  const Epilogue* after = epilogue.empty() ? nullptr : &epilogue;
  assert(a.cols() == b.cols() && c.rows() == a.rows() && c.cols() == b.rows());
  if (b.is_read_by_row())
    throw Error("blas::gemm_nt", "a weight matrix read a row at a time, which is for row lookups only",
                "a bug in ordo's weight binding (models/stored_matrix.cpp); please report it");
  if (c.empty()) return;
  if (kernels::integer_product_takes(b)) return integer_gemm(a, b, c, after);
  const bool small = a.rows() <= kSmallRows && b.rows() * b.cols() >= kParallelWeights;
  if (b.is_float32() && (a.rows() == 1 || small)) return multiply_nt(a, b.float32(), c, 1.0f, 0.0f, after);
  if (a.rows() == 1) return stored_matvec(a, b, c, after);
  if (small) return stored_small_gemm(a, b, c, after);
  weight_gemm(a, b, c, after);
}

void gemm_nn(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta) {
  assert(a.cols() == b.rows() && c.rows() == a.rows() && c.cols() == b.cols());
  if (c.empty()) return;
  if (a.rows() == 1) {  // c = a b: attention's probabilities times values, small
    kernels::vecmat(a.data(), b.data(), b.rows(), b.cols(), b.stride(), c.data(), alpha, beta);
    return;
  }
  ready_for_openblas();
  const std::shared_ptr<ThreadPool> workers = threads::workers_for(c.rows() * c.cols() * a.cols(), kParallelFlops);
  if (!workers) return sgemm(CblasNoTrans, a, b, c, alpha, beta);
  threads::split(*workers, b.cols(), 16, [&](Index first, Index count, int) {
    sgemm(CblasNoTrans, a, b.col_block(first, count), c.col_block(first, count), alpha, beta);
  });
}

}  // namespace ordo::blas
