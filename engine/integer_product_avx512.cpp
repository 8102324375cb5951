#include "engine/integer_product_avx512.h"

#include <algorithm>
#include <cstdint>

#include "engine/integer_product.h"
#include "engine/integer_product_internal.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// and -Wuninitialized report wherever they are inlined (GCC bug 105593, fixed in GCC 13).
// Clang has no -Wmaybe-uninitialized (it would warn about the pragma) and no such bug.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

namespace ordo::kernels::avx512 {

bool cpu_has_vnni() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

bool integer_product_takes(const WeightMatrix& w) {
  return cpu_has_vnni() && w.format() == WeightFormat::Int8 && (w.group() == w.cols() || w.group() % 64 == 0);
}

#if defined(__x86_64__)

namespace {

using integer_detail::final_sum;
using integer_detail::weight_scale;

#define ORDO_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define ORDO_VNNI_LAMBDA __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline))
// Unrolls a tile's loops over its rows, so that its totals stay in registers: rolled,
// GCC 12 also stored the 16 totals of a 4 x 4 tile to the stack every step.
#define ORDO_UNROLL _Pragma("GCC unroll 16")

// acc += the four-product lane sums of unsigned a and signed b, in place. GCC 12 copies
// the accumulator of _mm512_dpbusd_epi32 to a fresh register and back on every call
// (three instructions for one), and the copies spilled the 4 x 4 tile's accumulators.
ORDO_VNNI inline void dot_add(__m512i& acc, __m512i a, __m512i b) {
  asm("vpdpbusd %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
}

// The lanes of two runs of 32 added into the definition's eight (exact).
ORDO_VNNI inline __m256i fold(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// A group's lanes for MR activation rows and NR weight rows, into p[i][j]. int8: the
// unsigned operand is q + 128 and the signed one w, and (q + 128) w - 128 w is q w; the
// sums of w are one more vpdpbusd a weight vector, shared by the MR rows. A row's last
// partial 64 are masked loads (zeros add nothing). Lane sums wrap modulo 2^32 on the
// way and are exact at the end.
template <int MR, int NR>
ORDO_VNNI void group_int8(const QuantizedActivations& a, Index i0, const std::int8_t* const (&rows)[NR], Index begin,
                          Index end, __m256i (&p)[MR][NR]) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i acc[MR][NR], weight_sum[NR];
  for (int j = 0; j < NR; ++j) {
    weight_sum[j] = _mm512_setzero_si512();
    for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_setzero_si512();
  }
  const auto chunk = [&](Index k, __mmask64 in) ORDO_VNNI_LAMBDA {
    __m512i v[NR];
    for (int j = 0; j < NR; ++j) {
      v[j] = in == ~__mmask64{0} ? _mm512_loadu_si512(rows[j] + k) : _mm512_maskz_loadu_epi8(in, rows[j] + k);
      dot_add(weight_sum[j], ones, v[j]);
    }
    for (int i = 0; i < MR; ++i) {
      const __m512i q = _mm512_loadu_si512(a.q_unsigned(i0 + i) + k);
      for (int j = 0; j < NR; ++j) dot_add(acc[i][j], q, v[j]);
    }
  };
  Index k = begin;
  for (; k + 64 <= end; k += 64) chunk(k, ~__mmask64{0});
  if (k < end) chunk(k, (__mmask64{1} << (end - k)) - 1);
  for (int j = 0; j < NR; ++j) {
    const __m512i offset = _mm512_slli_epi32(weight_sum[j], 7);
    for (int i = 0; i < MR; ++i) p[i][j] = fold(_mm512_sub_epi32(acc[i][j], offset));
  }
}

// MR activation rows (from i0) times NR weight rows (from r), one group at a time.
template <int MR, int NR>
ORDO_VNNI void tile_by_group(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index spacing,
                             Index first,
                             float* y, Index y_stride) {
  const std::int8_t* int8_rows[NR];
  for (int j = 0; j < NR; ++j) int8_rows[j] = w.row<std::int8_t>(r + j * spacing);
  __m256 t[MR][NR][2];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) t[i][j][0] = t[i][j][1] = _mm256_setzero_ps();
  for (Index g = 0; g < a.groups(); ++g) {
    const Index begin = g * a.group(), end = begin + a.group();
    __m256i p[MR][NR];
    group_int8<MR, NR>(a, i0, int8_rows, begin, end, p);
    for (int j = 0; j < NR; ++j) {
      const float scale = weight_scale(w, r + j * spacing, g);
      for (int i = 0; i < MR; ++i) {
        const __m256 c = _mm256_set1_ps(a.scales(i0 + i)[g] * scale);
        t[i][j][g % 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[i][j]), c, t[i][j][g % 2]);
      }
    }
  }
  if constexpr (MR % 2 == 0 && NR == 4) {
    if (spacing == 1) {  // the panel's tiles: two rows' four results at a time, side by side
      for (int i = 0; i < MR; i += 2) {
        __m256 even[8], odd[8];
        for (int n = 0; n < 8; ++n) {
          even[n] = t[i + n / 4][n % 4][0];
          odd[n] = t[i + n / 4][n % 4][1];
        }
        const __m256 sums = integer_detail::final_sums8(even, odd);
        _mm_storeu_ps(y + (i0 + i) * y_stride + (r - first), _mm256_castps256_ps128(sums));
        _mm_storeu_ps(y + (i0 + i + 1) * y_stride + (r - first), _mm256_extractf128_ps(sums, 1));
      }
      return;
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[(i0 + i) * y_stride + (r + j * spacing - first)] = final_sum(t[i][j][0], t[i][j][1]);
}

// Weight rows r, r + spacing, ..., r + (NR - 1) spacing.
template <int MR, int NR>
ORDO_VNNI void tile(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index spacing, Index first,
                    float* y, Index y_stride) {
  tile_by_group<MR, NR>(a, w, i0, r, spacing, first, y, y_stride);
}

constexpr int NR = 4;

// MR activation rows (from i0) against the weight rows [panel, end), NR at a time.
template <int MR>
ORDO_VNNI void tile_row(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index panel, Index end,
                        Index first, float* y, Index y_stride) {
  Index r = panel;
  for (; r + NR <= end; r += NR) tile<MR, NR>(a, w, i0, r, 1, first, y, y_stride);
  for (; r < end; ++r) tile<MR, 1>(a, w, i0, r, 1, first, y, y_stride);
}

}  // namespace

// One row of activations (a decode step) streams the matrix once: its NR rows at a time
// are a quarter of the matrix apart, four sequential streams the hardware prefetcher
// follows (the bench model decoded 1.3x faster than with adjacent rows and a software
// prefetch, 2.4x faster than adjacent rows alone). More rows: a panel of weight rows
// (in L2) meets every tile of activation rows (in L1); a software prefetch there cost
// 12% of prefill.
ORDO_VNNI void integer_product(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count,
                               float* y, Index y_stride) {
  constexpr int MR = 4;
  if (a.rows() < MR) {
    const Index quarter = count / NR;
    for (Index i0 = 0; i0 < a.rows(); ++i0) {
      for (Index r = first; r < first + quarter; ++r) tile<1, NR>(a, w, i0, r, quarter, first, y, y_stride);
      for (Index r = first + NR * quarter; r < first + count; ++r) tile<1, 1>(a, w, i0, r, 1, first, y, y_stride);
    }
    return;
  }
  constexpr Index kPanel = 64;
  for (Index panel = first; panel < first + count; panel += kPanel) {
    const Index end = std::min(first + count, panel + kPanel);
    integer_detail::stream_in(w, panel, end);
    Index i0 = 0;
    for (; i0 + MR <= a.rows(); i0 += MR) tile_row<MR>(a, w, i0, panel, end, first, y, y_stride);
    for (; i0 < a.rows(); ++i0) tile_row<1>(a, w, i0, panel, end, first, y, y_stride);
  }
}

#endif

}  // namespace ordo::kernels::avx512
