#include "engine/matvec.h"

#include <algorithm>

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

void store(float* y, float value, float alpha, float beta) { *y = alpha * value + (beta == 0.0f ? 0.0f : beta * *y); }

void matvec_portable(const float* w, Index rows, Index cols, Index stride, const float* x, float* y, float alpha,
                     float beta) {
  for (Index r = 0; r < rows; ++r) store(y + r, dot_portable(w + r * stride, x, cols), alpha, beta);
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
    for (; k < cols; ++k) sum += row[k] * x[k];
    store(y + r, sum, alpha, beta);
  }
}

// A block of up to 8 rows of x against one row of w: eight accumulators, and each
// 8-float load of w serves eight rows of x. One row of w at a time keeps the matrix a
// single sequential stream, which the hardware prefetcher follows (blocks of three or
// four rows of w made as many short streams and ran slower); the row stays in L1 while
// the next eight rows of x meet it.
constexpr Index kBlockX = 8;
constexpr Index kBlockW = 1;

template <int MX, int MW>
__attribute__((target("avx2,fma"))) void block_avx2(const float* const* xs, const float* const* ws, Index cols,
                                                    float (&out)[kBlockX][kBlockW]) {
  __m256 acc[MX][MW];
  for (int i = 0; i < MX; ++i)
    for (int j = 0; j < MW; ++j) acc[i][j] = _mm256_setzero_ps();
  const Index vector_end = cols - cols % 8;
  for (Index k = 0; k < vector_end; k += 8) {
    __m256 wv[MW];
    for (int j = 0; j < MW; ++j) wv[j] = _mm256_loadu_ps(ws[j] + k);
    for (int i = 0; i < MX; ++i) {
      const __m256 xv = _mm256_loadu_ps(xs[i] + k);
      for (int j = 0; j < MW; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MX; ++i)
    for (int j = 0; j < MW; ++j) {
      float sum = horizontal_sum(acc[i][j]);
      for (Index k = vector_end; k < cols; ++k) sum += xs[i][k] * ws[j][k];
      out[i][j] = sum;
    }
}

// Blocks at the edge of x run the kernel one row of x at a time.
__attribute__((target("avx2,fma"))) void small_gemm_avx2(const float* x, Index m, Index x_stride, const float* w,
                                                         Index rows, Index cols, Index stride, float* y,
                                                         Index y_stride, float alpha, float beta) {
  float out[kBlockX][kBlockW];
  for (Index r = 0; r < rows; r += kBlockW) {
    const Index wn = std::min(kBlockW, rows - r);
    const float* ws[kBlockW];
    for (Index j = 0; j < kBlockW; ++j) ws[j] = w + (r + std::min(j, wn - 1)) * stride;
    for (Index i = 0; i < m; i += kBlockX) {
      const Index xn = std::min(kBlockX, m - i);
      const float* xs[kBlockX];
      for (Index t = 0; t < kBlockX; ++t) xs[t] = x + (i + std::min(t, xn - 1)) * x_stride;
      if (xn == kBlockX && wn == kBlockW) {
        block_avx2<kBlockX, kBlockW>(xs, ws, cols, out);
      } else {
        for (Index t = 0; t < xn; ++t) {
          const float* one_x[kBlockX] = {xs[t]};
          float row[kBlockX][kBlockW];
          if (wn == kBlockW) {
            block_avx2<1, kBlockW>(one_x, ws, cols, row);
            for (Index j = 0; j < wn; ++j) out[t][j] = row[0][j];
          } else {
            for (Index j = 0; j < wn; ++j) {
              const float* one_w[kBlockW] = {ws[j]};
              block_avx2<1, 1>(one_x, one_w, cols, row);
              out[t][j] = row[0][0];
            }
          }
        }
      }
      for (Index t = 0; t < xn; ++t)
        for (Index j = 0; j < wn; ++j) store(y + (i + t) * y_stride + r + j, out[t][j], alpha, beta);
    }
  }
}

bool has_avx2() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
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
  for (Index c = 0; c < cols; ++c) y[c] = beta == 0.0f ? 0.0f : beta * y[c];
  for (Index r = 0; r < rows; ++r) {
    const float factor = alpha * x[r];
    const float* row = w + r * stride;
    for (Index c = 0; c < cols; ++c) y[c] += factor * row[c];
  }
}

}  // namespace ordo::kernels
