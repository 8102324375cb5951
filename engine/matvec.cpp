#include "engine/matvec.h"

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

void vecmat(const float* x, const float* w, Index rows, Index cols, Index stride, float* y, float alpha, float beta) {
  for (Index c = 0; c < cols; ++c) y[c] = beta == 0.0f ? 0.0f : beta * y[c];
  for (Index r = 0; r < rows; ++r) {
    const float factor = alpha * x[r];
    const float* row = w + r * stride;
    for (Index c = 0; c < cols; ++c) y[c] += factor * row[c];
  }
}

}  // namespace ordo::kernels
