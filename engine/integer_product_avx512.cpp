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

bool integer_product_takes(const QuantizedActivations& a, const WeightMatrix& w) {
  if (!cpu_has_vnni()) return false;
  if (w.format() == WeightFormat::Int8) return w.group() == w.cols() || w.group() % 64 == 0;
  // int4 in groups of 64: AVX2's kernels run faster than these tiles, which convert a
  // weight scale for every 64 weights (one thread, 768 x 2048, 4 to 256 rows: 34-36
  // against 30 GMAC/s); from 128 the tiles are faster (52 against 45, 256: 77-81 against 52).
  return w.format() == WeightFormat::Int4 &&
         ((w.group() % 64 == 0 && w.group() >= 128) || (int4_pairs(w) && a.pairs()));
}

#if defined(__x86_64__)

namespace {

using integer_detail::final_sum;
using integer_detail::weight_scale;

#define ORDO_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define ORDO_VNNI_LAMBDA __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline))
// Unrolls a tile's loops over its rows, so that its totals stay in registers: rolled,
// GCC 12 also stored the 16 totals of a 4 x 4 int4 tile to the stack every step.
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

// Two runs of 32 int4 weights (32 bytes) as 64 unsigned bytes n (0..15) in weight order:
// the low nibbles of a run are its weights 0..15, the high ones 16..31.
ORDO_VNNI inline __m512i unpack_int4_pair(const std::uint8_t* runs) {
  const __m512i bytes = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs)));
  // 128-bit lanes [run 0, run 0, run 1, run 1], the second of each shifted right by 4.
  const __m512i twice = _mm512_shuffle_i64x2(bytes, bytes, _MM_SHUFFLE(1, 1, 0, 0));
  const __m512i shifted = _mm512_srlv_epi64(twice, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f));
}

// Two runs of 32 int4 weights (32 bytes) as 64 unsigned bytes n (0..15) in the pair
// order (QuantizedActivations::pair_q): the 32 bytes in both halves, the upper half's
// shifted right by 4, then masked: [run 0's low nibbles (its weights 0-15), run 1's
// (32-47) | run 0's high nibbles (16-31), run 1's (48-63)]. Two instructions; the
// weight order takes three.
// (A shift by a count per 16-bit lane: a masked shift by 4 would merge into a copy.)
ORDO_VNNI inline __m512i unpack_int4_pair_order(const std::uint8_t* runs, __m512i upper_by_4) {
  const __m512i twice = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs)));
  return _mm512_and_si512(_mm512_srlv_epi16(twice, upper_by_4), _mm512_set1_epi8(0x0f));
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

// Lanes in the pair order [g 0-3, g + 1 0-3, g 4-7, g + 1 4-7] take the value of group
// g = 2p or g + 1 of a block of 16 groups, for the pair p of the block.
alignas(64) constexpr std::int32_t kPairPicks[8][16] = {
    {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1},         {2, 2, 2, 2, 3, 3, 3, 3, 2, 2, 2, 2, 3, 3, 3, 3},
    {4, 4, 4, 4, 5, 5, 5, 5, 4, 4, 4, 4, 5, 5, 5, 5},         {6, 6, 6, 6, 7, 7, 7, 7, 6, 6, 6, 6, 7, 7, 7, 7},
    {8, 8, 8, 8, 9, 9, 9, 9, 8, 8, 8, 8, 9, 9, 9, 9},         {10, 10, 10, 10, 11, 11, 11, 11, 10, 10, 10, 10, 11, 11, 11, 11},
    {12, 12, 12, 12, 13, 13, 13, 13, 12, 12, 12, 12, 13, 13, 13, 13}, {14, 14, 14, 14, 15, 15, 15, 15, 14, 14, 14, 14, 15, 15, 15, 15},
};

// Totals in the pair order back to the definition's chains: even groups' lanes 0-7 in
// the low half, odd groups' in the high half.
alignas(64) constexpr std::int32_t kChains[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

// The lanes of a block of 16 groups from g that a row of `groups` groups has.
inline __mmask16 block_mask(Index g, Index groups) {
  const Index left = groups - g;
  return static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
}

// The F16 scales of groups [g, g + 16) of a weight row as float32 (0 past the last group).
ORDO_VNNI inline __m512 block_of_scales(const std::uint16_t* scales, Index g, Index groups) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(block_mask(g, groups), scales + g));
}

// The scales of groups [g, g + 16) of an activation row (0 past the last group).
ORDO_VNNI inline __m512 block_of_activation_scales(const float* scales, Index g, Index groups) {
  return _mm512_maskz_loadu_ps(block_mask(g, groups), scales + g);
}

// int4 in groups of 32, rows of a multiple of 64: each 64 weights are groups g and g + 1
// (g even), unpacked in the pair order against q arranged to match, so vpdpbusd, started
// from minus the offsets, gives both groups' P in one instruction, and the definition's
// two chains of totals (even and odd groups) share one 16-lane vector. c_g = s_g w_g for
// each lane: the weight scales are converted 16 groups at a time and each step picks its
// two; one activation row (a decode step) multiplies those blocks by its scales once
// (c of 16 groups), more rows multiply a step's picked weight scales by the activations'
// pair_scales. Against the weight order (three instructions to unpack a row's 64, three
// to convert and spread its two scales, one to negate a row's offsets, each step, and
// the totals stored every step), one thread, 512 rows of activations: 1.10-1.20x; end to
// end, batch 16, 2 threads: decode 1.07-1.10x, prefill and encode 1.12x.
template <int MR, int NR>
ORDO_VNNI void tile_int4_pairs(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index spacing,
                               Index first, float* y, Index y_stride) {
  const std::uint8_t* rows[NR];
  const std::uint16_t* scales[NR];
  ORDO_UNROLL
  for (int j = 0; j < NR; ++j) {
    rows[j] = w.row<std::uint8_t>(r + j * spacing);
    scales[j] = w.row_scales<std::uint16_t>(r + j * spacing);
  }
  const std::int8_t* q_rows[MR];
  const std::int32_t* minus_offsets_rows[MR];
  const float* scales_rows[MR];
  __m512 t[MR][NR];
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i) {
    q_rows[i] = a.pair_q(i0 + i);
    minus_offsets_rows[i] = a.pair_minus_offsets(i0 + i);
    scales_rows[i] = a.pair_scales(i0 + i);
    ORDO_UNROLL
    for (int j = 0; j < NR; ++j) t[i][j] = _mm512_setzero_ps();
  }
  const __m512i upper_by_4 = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0x0004000400040004,
                                              0x0004000400040004, 0, 0, 0, 0);
  const Index groups = a.groups();
  const float* activation_block_scales = a.scales(i0);
  // Blocks of 16 groups' scales (c for one activation row). Tiles of more rows keep
  // them in memory, where vpermps reads its table, and their registers for the totals.
  __m512 block_registers[NR];
  alignas(64) float block_memory[NR][16];
  for (Index k = 0, cols = a.cols(); k < cols; k += 64) {
    const Index g = k / 32;
    if (g % 16 == 0) {
      ORDO_UNROLL
      for (int j = 0; j < NR; ++j) {
        const __m512 block = block_of_scales(scales[j], g, groups);
        if constexpr (MR == 1) {
          block_registers[j] = _mm512_mul_ps(block_of_activation_scales(activation_block_scales, g, groups), block);
        } else {
          _mm512_store_ps(block_memory[j], block);
        }
      }
    }
    const __m512i pick = _mm512_load_si512(kPairPicks[g % 16 / 2]);
    __m512i n[NR];
    __m512 weight_scales[NR];
    ORDO_UNROLL
    for (int j = 0; j < NR; ++j) {
      n[j] = unpack_int4_pair_order(rows[j] + k / 2, upper_by_4);
      if constexpr (MR == 1)
        weight_scales[j] = _mm512_permutexvar_ps(pick, block_registers[j]);
      else
        weight_scales[j] = _mm512_permutexvar_ps(pick, _mm512_load_ps(block_memory[j]));
    }
    ORDO_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m512i q = _mm512_loadu_si512(q_rows[i] + k);
      const __m512 activation_scales = _mm512_loadu_ps(scales_rows[i] + g * 8);
      const __m512i minus_offsets = _mm512_loadu_si512(minus_offsets_rows[i] + g * 8);
      ORDO_UNROLL
      for (int j = 0; j < NR; ++j) {
        __m512i lanes = minus_offsets;
        dot_add(lanes, n[j], q);  // P = n q - offsets
        __m512 c = weight_scales[j];  // one row: already c
        if constexpr (MR > 1) c = _mm512_mul_ps(activation_scales, weight_scales[j]);
        t[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), c, t[i][j]);
      }
    }
  }
  const __m512i chains = _mm512_load_si512(kChains);
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i)
    ORDO_UNROLL
    for (int j = 0; j < NR; ++j) {
      const __m512 both = _mm512_permutexvar_ps(chains, t[i][j]);
      y[(i0 + i) * y_stride + (r + j * spacing - first)] =
          final_sum(_mm512_castps512_ps256(both), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(both), 1)));
    }
}

// Weight rows r, r + spacing, ..., r + (NR - 1) spacing.
template <int MR, int NR>
ORDO_VNNI void tile(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index spacing, Index first,
                    float* y, Index y_stride) {
  if (w.format() == WeightFormat::Int4 && int4_pairs(w))  // a.pairs(): integer_product_takes
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
