// What engine/integer_product.cpp's AVX2 path and engine/integer_product_avx512.cpp
// share: the last of the definition's float steps, which must be the same instructions
// on every path for the numbers to be, and the pass that streams a panel of weights in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/half.h"
#include "engine/weight_matrix.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ordo::kernels::integer_detail {

// Where lane l of group g sits in a run of 32: weights 4l..4l+3 (engine/integer_product.h).
inline int lane_of(Index k_in_group) { return static_cast<int>(k_in_group % 32 / 4); }

// Group g's weight scale of row r as float32 (int4's are F16: the conversion is exact).
// Inline: the batch tiles ask for it every group of every tile.
inline float weight_scale(const WeightMatrix& w, Index r, Index g) {
  if (w.format() == WeightFormat::Int8) return w.row_scales<float>(r)[g];
  return half_to_float(w.row_scales<std::uint16_t>(r)[g]);
}

#if defined(__x86_64__)
// u = t0 + t1, then ((u0 + u4) + (u2 + u6)) + ((u1 + u5) + (u3 + u7)).
__attribute__((target("avx2,fma"))) inline float final_sum(__m256 t0, __m256 t1) {
  const __m256 u = _mm256_add_ps(t0, t1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}

// final_sum of eight pairs (t0[n], t1[n]) at once, the same additions in the same order:
// result n in lane n. u = t0 + t1; x = u's halves added; y0 = x0 + x2, y1 = x1 + x3 by
// a shuffle of two x's; y0 + y1 by vhaddps. A third of final_sum's instructions each.
__attribute__((target("avx2,fma"))) inline __m256 final_sums8(const __m256 (&t0)[8], const __m256 (&t1)[8]) {
  __m256 x[4];
  for (int n = 0; n < 4; ++n) {
    const __m256 a = _mm256_add_ps(t0[n], t1[n]), b = _mm256_add_ps(t0[n + 4], t1[n + 4]);
    // [a0 + a4, a1 + a5, a2 + a6, a3 + a7, b0 + b4, ...]: result n's x, then result n + 4's
    x[n] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  }
  // [y0, y1 of n, of n + 1 | of n + 4, of n + 5]
  const __m256 y01 = _mm256_add_ps(_mm256_shuffle_ps(x[0], x[1], 0x44), _mm256_shuffle_ps(x[0], x[1], 0xee));
  const __m256 y23 = _mm256_add_ps(_mm256_shuffle_ps(x[2], x[3], 0x44), _mm256_shuffle_ps(x[2], x[3], 0xee));
  return _mm256_hadd_ps(y01, y23);
}

// Reads weight rows [begin, end) of w, one load a cache line, so that the tiles after it
// find them in cache: a loop of nothing but loads keeps enough of them in flight to
// stream at the memory's rate, which tiles that compute between their loads do not.
// Before each panel of the batch tiles (paired, int8 llama decode, an Intel Xeon): AVX2
// at batch 4 1.13x, 16 1.13x, 32 1.08x; AVX-512 at batch 4 1.08x, 16 1.30x.
__attribute__((target("avx2"), noinline)) inline void stream_in(const WeightMatrix& w, Index begin, Index end) {
  const std::byte* from = w.row<std::byte>(begin);
  const std::byte* const to = w.row<std::byte>(end);
  __m256i any = _mm256_setzero_si256();
  for (; from + 256 <= to; from += 256)
    for (int line = 0; line < 4; ++line)
      any = _mm256_or_si256(any, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + 64 * line)));
  asm volatile("" : : "x"(any));  // the loads are the point: kept
}
#endif

}  // namespace ordo::kernels::integer_detail
