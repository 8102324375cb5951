#include "engine/matvec.h"

#include <algorithm>
#include <cmath>

#include "engine/kernel_path.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ordo::kernels {

namespace {

float dot_portable(const float* w, const float* x, Index n) {
  float sum = 0.0f;
  for (Index k = 0; k < n; ++k) sum += w[k] * x[k];
  return sum;
}

void matvec_portable(const float* w, Index rows, Index cols, Index stride, const float* x, float* y, float alpha,
                     float beta) {
  for (Index r = 0; r < rows; ++r) store_scaled(y + r, dot_portable(w + r * stride, x, cols), alpha, beta);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float horizontal_sum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}

// One row after another, so the matrix is read as a single sequential stream (which
// the hardware prefetcher follows at full speed; interleaving several rows made four
// short streams and halved the bandwidth), with four accumulators per row so that four
// independent FMA chains keep the loads in flight. x stays in L1.
__attribute__((target("avx2,fma"))) void matvec_avx2(const float* w, Index rows, Index cols, Index stride,
                                                     const float* x, float* y, float alpha, float beta) {
  const Index wide_end = cols - cols % 32;
  const Index narrow_end = cols - cols % 8;
  for (Index r = 0; r < rows; ++r) {
    const float* row = w + r * stride;
    __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
    Index k = 0;
    for (; k < wide_end; k += 32) {
      a = _mm256_fmadd_ps(_mm256_loadu_ps(row + k), _mm256_loadu_ps(x + k), a);
      b = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 8), _mm256_loadu_ps(x + k + 8), b);
      c = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 16), _mm256_loadu_ps(x + k + 16), c);
      d = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 24), _mm256_loadu_ps(x + k + 24), d);
    }
    for (; k < narrow_end; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(row + k), _mm256_loadu_ps(x + k), a);
    float sum = horizontal_sum(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
    // The tail with explicit FMAs (what the compiler made of it anyway): the stored-format
    // kernels (engine/quantized_matvec.cpp) must give these very sums.
    for (; k < cols; ++k) sum = std::fma(row[k], x[k], sum);
    store_scaled(y + r, sum, alpha, beta);
  }
}

constexpr Index kFarAhead = 12 * 1024;

// One 8-float step of a tile: acc[i][j] += x_i[k..k+8) * w_j[k..k+8).
template <int MX, int MW>
__attribute__((target("avx2,fma"), always_inline)) inline void tile_step(const float* const* xs,
                                                                         const float* const* ws, Index k,
                                                                         __m256 (&acc)[MX][MW]) {
  __m256 wv[MW];
  for (int j = 0; j < MW; ++j) wv[j] = _mm256_loadu_ps(ws[j] + k);
  for (int i = 0; i < MX; ++i) {
    const __m256 xv = _mm256_loadu_ps(xs[i] + k);
    for (int j = 0; j < MW; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
  }
}

// A tile of MX rows of x against MW rows of w, out[i][j] = dot(x_i, w_j), with MX * MW
// accumulators: each 8-float load of w serves MX rows of x and each load of x serves
// MW rows of w. While it computes, the tile also prefetches the cache lines [ahead,
// ahead_end) of a later block of w, as fast as it reads its own.
template <int MX, int MW>
__attribute__((target("avx2,fma"))) void tile_avx2(const float* const* xs, const float* const* ws, Index cols,
                                                   const char* ahead, const char* ahead_end, float (&out)[MX][MW]) {
  // Small tiles also unroll k, so that at least eight independent FMA chains hide the
  // FMA latency.
  constexpr int U = MX * MW >= 8 ? 1 : 8 / (MX * MW);
  __m256 acc[U][MX][MW];
  for (int u = 0; u < U; ++u)
    for (int i = 0; i < MX; ++i)
      for (int j = 0; j < MW; ++j) acc[u][i][j] = _mm256_setzero_ps();
  const Index unrolled_end = cols - cols % (8 * U);
  const Index vector_end = cols - cols % 8;
  Index k = 0;
  for (; k < unrolled_end; k += 8 * U) {
    // As many lines as the steps read of w (U * MW * 32 bytes): one tile alone keeps up.
    // Each line is also asked for 12 KB further on, into L2, so that the L1 prefetch
    // finds it there rather than in memory (a prefetch never faults, so running past
    // the end of w is harmless): 1.2x at 16 rows from memory.
    for (int line = 0; line < (U * MW + 1) / 2 && ahead < ahead_end; ++line, ahead += 64) {
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + kFarAhead, _MM_HINT_T1);
    }
    for (int u = 0; u < U; ++u) tile_step<MX, MW>(xs, ws, k + 8 * u, acc[u]);
  }
  for (; k < vector_end; k += 8) tile_step<MX, MW>(xs, ws, k, acc[0]);
  for (int i = 0; i < MX; ++i)
    for (int j = 0; j < MW; ++j) {
      __m256 total = acc[0][i][j];
      for (int u = 1; u < U; ++u) total = _mm256_add_ps(total, acc[u][i][j]);
      float sum = horizontal_sum(total);
      for (Index r = vector_end; r < cols; ++r) sum += xs[i][r] * ws[j][r];
      out[i][j] = sum;
    }
}

// Where a tile prefetches and how much: the lines of w it should bring in.
struct Prefetch {
  const char* begin = nullptr;
  const char* end = nullptr;
};

// y [xn, wn] (alpha, beta) from the tile of xn <= MX rows of x and wn <= MW rows of w
// whose first rows are x and w: full tiles run tile_avx2<MX, MW>; a tile at the edge
// runs the largest kernel that fits it, so that edges cost little more than the rest.
template <int MX, int MW>
__attribute__((target("avx2,fma"))) void edge_tile(const float* x, Index xn, Index x_stride, const float* w,
                                                   Index wn, Index stride, Index cols, Prefetch ahead, float* y,
                                                   Index y_stride, float alpha, float beta) {
  if constexpr (MX > 1) {
    if (xn < MX) return edge_tile<MX - 1, MW>(x, xn, x_stride, w, wn, stride, cols, ahead, y, y_stride, alpha, beta);
  }
  if constexpr (MW > 1) {
    if (wn < MW) return edge_tile<MX, MW - 1>(x, xn, x_stride, w, wn, stride, cols, ahead, y, y_stride, alpha, beta);
  }
  const float* xs[MX];
  const float* ws[MW];
  for (int i = 0; i < MX; ++i) xs[i] = x + i * x_stride;
  for (int j = 0; j < MW; ++j) ws[j] = w + j * stride;
  float out[MX][MW];
  tile_avx2<MX, MW>(xs, ws, cols, ahead.begin, ahead.end, out);
  for (int i = 0; i < MX; ++i)
    for (int j = 0; j < MW; ++j) store_scaled(y + i * y_stride + j, out[i][j], alpha, beta);
}

// Every tile of y: a block of MW rows of w stays in cache while all rows of x meet it,
// and the tiles of one block share out the prefetching of the next block. Without it
// the first tile of each block waited on memory, and 16 rows of x against a matrix in
// memory ran at half their rate with the matrix in cache (33 against 67 GFLOP/s).
template <int MX, int MW>
__attribute__((target("avx2,fma"))) void tiled_gemm_avx2(const float* x, Index m, Index x_stride, const float* w,
                                                         Index rows, Index cols, Index stride, float* y,
                                                         Index y_stride, float alpha, float beta) {
  const Index tiles = (m + MX - 1) / MX;
  const Index block_bytes = static_cast<Index>(sizeof(float)) * ((MW - 1) * stride + cols);
  const Index share = (block_bytes / 64 + tiles) / tiles * 64;  // whole lines per tile, rounded up
  for (Index r = 0; r < rows; r += MW) {
    // One row of w at a time is a single stream the hardware prefetcher follows alone
    // (software prefetching slowed it); tiles of several rows read in bursts.
    const bool prefetch = MW > 1 && r + 2 * MW <= rows;
    const char* block = reinterpret_cast<const char*>(w + (r + MW) * stride);
    for (Index i = 0, tile = 0; i < m; i += MX, ++tile) {
      Prefetch ahead;
      if (prefetch) {
        ahead.begin = block + std::min(block_bytes, tile * share);
        ahead.end = block + std::min(block_bytes, (tile + 1) * share);
      }
      edge_tile<MX, MW>(x + i * x_stride, std::min<Index>(MX, m - i), x_stride, w + r * stride,
                        std::min<Index>(MW, rows - r), stride, cols, ahead, y + i * y_stride + r, y_stride, alpha,
                        beta);
    }
  }
}

// Up to 8 rows of x (a decode step of a small batch, bound by the memory bandwidth):
// one row of w at a time, so the matrix is a single sequential stream that the
// hardware prefetcher follows (tiles of two or four rows of w ran at half the
// bandwidth), meeting all rows of x while it is in L1. More rows of x make the product
// bound by the FMA units instead: tiles of 4 rows of x by 3 of w need 7 loads for 12
// FMAs, where 8 by 1 needs 9 for 8 (at 16 rows, 42 against 24 GFLOP/s per core).
__attribute__((target("avx2,fma"))) void small_gemm_avx2(const float* x, Index m, Index x_stride, const float* w,
                                                         Index rows, Index cols, Index stride, float* y,
                                                         Index y_stride, float alpha, float beta) {
  if (m <= 2) return tiled_gemm_avx2<2, 1>(x, m, x_stride, w, rows, cols, stride, y, y_stride, alpha, beta);
  if (m <= 4) return tiled_gemm_avx2<4, 1>(x, m, x_stride, w, rows, cols, stride, y, y_stride, alpha, beta);
  if (m <= 8) return tiled_gemm_avx2<8, 1>(x, m, x_stride, w, rows, cols, stride, y, y_stride, alpha, beta);
  tiled_gemm_avx2<4, 3>(x, m, x_stride, w, rows, cols, stride, y, y_stride, alpha, beta);
}

// Columns in blocks of 32 (four accumulators, kept in registers over all rows: one
// head's 64 values are two blocks), then 8, then one at a time.
__attribute__((target("avx2,fma"))) void vecmat_avx2(const float* x, const float* w, Index rows, Index cols,
                                                     Index stride, float* y, float alpha, float beta) {
  const auto finish = [&](Index c, float sum) { store_scaled(y + c, sum, alpha, beta); };
  Index c = 0;
  for (; c + 32 <= cols; c += 32) {
    __m256 a = _mm256_setzero_ps(), b = a, d = a, e = a;
    for (Index r = 0; r < rows; ++r) {
      const float* row = w + r * stride + c;
      const __m256 factor = _mm256_set1_ps(x[r]);
      a = _mm256_fmadd_ps(factor, _mm256_loadu_ps(row), a);
      b = _mm256_fmadd_ps(factor, _mm256_loadu_ps(row + 8), b);
      d = _mm256_fmadd_ps(factor, _mm256_loadu_ps(row + 16), d);
      e = _mm256_fmadd_ps(factor, _mm256_loadu_ps(row + 24), e);
    }
    alignas(32) float sums[32];
    _mm256_store_ps(sums, a);
    _mm256_store_ps(sums + 8, b);
    _mm256_store_ps(sums + 16, d);
    _mm256_store_ps(sums + 24, e);
    for (Index i = 0; i < 32; ++i) finish(c + i, sums[i]);
  }
  for (; c + 8 <= cols; c += 8) {
    __m256 a = _mm256_setzero_ps();
    for (Index r = 0; r < rows; ++r) a = _mm256_fmadd_ps(_mm256_set1_ps(x[r]), _mm256_loadu_ps(w + r * stride + c), a);
    alignas(32) float sums[8];
    _mm256_store_ps(sums, a);
    for (Index i = 0; i < 8; ++i) finish(c + i, sums[i]);
  }
  for (; c < cols; ++c) {
    float sum = 0.0f;
    for (Index r = 0; r < rows; ++r) sum += x[r] * w[r * stride + c];
    finish(c, sum);
  }
}

#endif

}  // namespace

void matvec(const float* w, Index rows, Index cols, Index stride, const float* x, float* y, float alpha, float beta) {
#if defined(__x86_64__)
  if (has_avx2()) return matvec_avx2(w, rows, cols, stride, x, y, alpha, beta);
#endif
  matvec_portable(w, rows, cols, stride, x, y, alpha, beta);
}

void small_gemm_nt(const float* x, Index m, Index x_stride, const float* w, Index rows, Index cols, Index stride,
                   float* y, Index y_stride, float alpha, float beta) {
#if defined(__x86_64__)
  if (has_avx2()) return small_gemm_avx2(x, m, x_stride, w, rows, cols, stride, y, y_stride, alpha, beta);
#endif
  for (Index i = 0; i < m; ++i) matvec_portable(w, rows, cols, stride, x + i * x_stride, y + i * y_stride, alpha, beta);
}

void vecmat(const float* x, const float* w, Index rows, Index cols, Index stride, float* y, float alpha, float beta) {
#if defined(__x86_64__)
  if (has_avx2()) return vecmat_avx2(x, w, rows, cols, stride, y, alpha, beta);
#endif
  for (Index c = 0; c < cols; ++c) y[c] = beta == 0.0f ? 0.0f : beta * y[c];
  for (Index r = 0; r < rows; ++r) {
    const float factor = alpha * x[r];
    const float* row = w + r * stride;
    for (Index c = 0; c < cols; ++c) y[c] += factor * row[c];
  }
}

}  // namespace ordo::kernels
