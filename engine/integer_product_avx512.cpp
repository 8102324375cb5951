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

namespace {
bool cpu_has_vnni() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

bool int4_pairs(const WeightMatrix& w) { return w.group() == 32 && w.cols() % 64 == 0; }
}  // namespace

bool integer_product_takes(const WeightMatrix& w) {
  if (!cpu_has_vnni()) return false;
  if (w.format() == WeightFormat::Int8) return w.group() == w.cols() || w.group() % 64 == 0;
  return w.format() == WeightFormat::Int4 && (w.group() % 64 == 0 || int4_pairs(w));
}

#if defined(__x86_64__)

namespace {

using integer_detail::final_sum;
using integer_detail::weight_scale;

#define ORDO_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define ORDO_VNNI_LAMBDA __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline))

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

// Two runs of 32 int4 weights (32 bytes) as 64 unsigned bytes n (0..15) in weight order:
// the low nibbles of a run are its weights 0..15, the high ones 16..31.
ORDO_VNNI inline __m512i unpack_int4_pair(const std::uint8_t* runs) {
  const __m512i bytes = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs)));
  // 128-bit lanes [run 0, run 0, run 1, run 1], the second of each shifted right by 4.
  const __m512i twice = _mm512_shuffle_i64x2(bytes, bytes, _MM_SHUFFLE(1, 1, 0, 0));
  const __m512i shifted = _mm512_srlv_epi64(twice, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f));
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

// int4, a group of a multiple of 64: the nibbles n are the unsigned operand, q the
// signed one, and P = lanes of n q minus 8 (sum of q) per lane.
template <int MR, int NR>
ORDO_VNNI void group_int4(const QuantizedActivations& a, Index i0, const std::uint8_t* const (&rows)[NR], Index g,
                          Index begin, Index end, __m256i (&p)[MR][NR]) {
  __m512i acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_si512();
  for (Index k = begin; k < end; k += 64) {
    __m512i n[NR];
    for (int j = 0; j < NR; ++j) n[j] = unpack_int4_pair(rows[j] + k / 2);
    for (int i = 0; i < MR; ++i) {
      const __m512i q = _mm512_loadu_si512(a.q(i0 + i) + k);
      for (int j = 0; j < NR; ++j) dot_add(acc[i][j], n[j], q);
    }
  }
  for (int i = 0; i < MR; ++i) {
    const __m256i offsets = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.nibble_offsets(i0 + i) + g * 8));
    for (int j = 0; j < NR; ++j) p[i][j] = _mm256_sub_epi32(fold(acc[i][j]), offsets);
  }
}

// MR activation rows (from i0) times NR weight rows (from r), one group at a time.
template <int MR, int NR>
ORDO_VNNI void tile_by_group(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index spacing,
                             Index first,
                             float* y, Index y_stride) {
  const std::int8_t* int8_rows[NR];
  const std::uint8_t* int4_rows[NR];
  for (int j = 0; j < NR; ++j) {
    int8_rows[j] = w.row<std::int8_t>(r + j * spacing);
    int4_rows[j] = w.row<std::uint8_t>(r + j * spacing);
  }
  __m256 t[MR][NR][2];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) t[i][j][0] = t[i][j][1] = _mm256_setzero_ps();
  for (Index g = 0; g < a.groups(); ++g) {
    const Index begin = g * a.group(), end = begin + a.group();
    __m256i p[MR][NR];
    if (w.format() == WeightFormat::Int8)
      group_int8<MR, NR>(a, i0, int8_rows, begin, end, p);
    else
      group_int4<MR, NR>(a, i0, int4_rows, g, begin, end, p);
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

// Lanes 0-7 take scale 2p of a block of 16, lanes 8-15 scale 2p + 1.
alignas(64) constexpr std::int32_t kPairScales[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},         {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},         {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},         {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13}, {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15},
};

// int4 in groups of 32, rows of a multiple of 64: each 64 bytes are groups g (lanes 0-7)
// and g + 1 (lanes 8-15), g even, and the definition's two chains of totals (even and
// odd groups) are the two halves of one 16-lane vector.
template <int MR, int NR>
ORDO_VNNI void tile_int4_pairs(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index spacing,
                               Index first,
                               float* y, Index y_stride) {
  const std::uint8_t* rows[NR];
  const std::uint16_t* scales[NR];
  for (int j = 0; j < NR; ++j) {
    rows[j] = w.row<std::uint8_t>(r + j * spacing);
    scales[j] = w.row_scales<std::uint16_t>(r + j * spacing);
  }
  __m512 t[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) t[i][j] = _mm512_setzero_ps();
  // One activation row (a decode step): a weight row's scales of 16 groups at a time,
  // converted once and multiplied by the activations' (c of 16 groups, the same products
  // c_g = s_g w_g), and each step picks its two (10% faster, and the multiply moved out 8% more).
  // Tiles of more rows convert each step's two, which leaves the registers their totals
  // need.
  __m512 block_scales[NR];
  for (Index k = 0; k < a.cols(); k += 64) {
    const Index g = k / 32;
    __m512i n[NR];
    __m512 weight_scales[NR];
    if constexpr (MR == 1) {
      if (g % 16 == 0) {
        const Index left = a.groups() - g;
        const auto mask = static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
        const __m512 activation_scales = _mm512_maskz_loadu_ps(mask, a.scales(i0) + g);
        for (int j = 0; j < NR; ++j)
          block_scales[j] =
              _mm512_mul_ps(activation_scales, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, scales[j] + g)));
      }
      const __m512i pick = _mm512_load_si512(kPairScales[g % 16 / 2]);
      for (int j = 0; j < NR; ++j) weight_scales[j] = _mm512_permutexvar_ps(pick, block_scales[j]);
    } else {
      for (int j = 0; j < NR; ++j) {
        std::uint32_t pair;
        __builtin_memcpy(&pair, scales[j] + g, sizeof pair);
        const __m256 two = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(pair))));
        weight_scales[j] = _mm512_permutexvar_ps(_mm512_load_si512(kPairScales[0]), _mm512_castps256_ps512(two));
      }
    }
    for (int j = 0; j < NR; ++j) n[j] = unpack_int4_pair(rows[j] + k / 2);
    for (int i = 0; i < MR; ++i) {
      const __m512i q = _mm512_loadu_si512(a.q(i0 + i) + k);
      // vpdpbusd adds n q to minus the offsets: P = n q - offsets in one instruction.
      const __m512i minus_offsets =
          _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(a.nibble_offsets(i0 + i) + g * 8));
      const __m512 activation_scales = _mm512_loadu_ps(a.lane_scales(i0 + i) + g * 8);
      for (int j = 0; j < NR; ++j) {
        const __m512i lanes = _mm512_dpbusd_epi32(minus_offsets, n[j], q);
        __m512 c = weight_scales[j];  // one row: already c
        if constexpr (MR > 1) c = _mm512_mul_ps(activation_scales, weight_scales[j]);
        t[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), c, t[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j)
      y[(i0 + i) * y_stride + (r + j * spacing - first)] =
          final_sum(_mm512_castps512_ps256(t[i][j]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t[i][j]), 1)));
}

// Weight rows r, r + spacing, ..., r + (NR - 1) spacing.
template <int MR, int NR>
ORDO_VNNI void tile(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index spacing, Index first,
                    float* y, Index y_stride) {
  if (w.format() == WeightFormat::Int4 && int4_pairs(w))
    return tile_int4_pairs<MR, NR>(a, w, i0, r, spacing, first, y, y_stride);
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
