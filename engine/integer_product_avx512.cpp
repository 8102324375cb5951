#include "engine/integer_product_avx512.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/integer_product.h"
#include "engine/integer_product_internal.h"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports wherever they are inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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
}  // namespace

bool integer_product_takes(const WeightMatrix& w) {
  if (!cpu_has_vnni()) return false;
  if (w.format() == WeightFormat::Int8) return w.group() == w.cols() || w.group() % 64 == 0;
  return w.format() == WeightFormat::Int4 && w.group() % 64 == 0;
}

#if defined(__x86_64__)

namespace {

using integer_detail::combine_avx2;
using integer_detail::weight_scales;

#define ORDO_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

template <class T>
const T* row_of(const WeightMatrix& w, Index r) {
  return reinterpret_cast<const T*>(static_cast<const std::byte*>(w.data()) + static_cast<std::size_t>(r) * w.row_bytes());
}

ORDO_VNNI inline std::int32_t horizontal_sum(__m512i v) {
  const __m256i half = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// Two runs of 32 int4 weights (32 bytes) as 64 unsigned bytes n (0..15) in weight order:
// the low nibbles of a run are its weights 0..15, the high ones 16..31.
ORDO_VNNI inline __m512i unpack_int4_pair(const std::uint8_t* runs) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs));
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i low = _mm256_and_si256(bytes, mask), high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
  // [run 0 low, run 1 low, run 0 high, run 1 high] -> [run 0 low, run 0 high, run 1 low, run 1 high]
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
  return _mm512_shuffle_i64x2(both, both, _MM_SHUFFLE(3, 1, 2, 0));
}

// The dots of MR activation rows (from i0) and NR weight rows, every group, into
// dots[(i * NR + j) * groups + g]. int8: the unsigned operand is q + 128 and the signed
// one w, so sum((q + 128) w) - 128 sum(w) is the dot; sum(w) is one more vpdpbusd a
// weight vector, shared by the MR activation rows. A row's last partial 64 are masked
// loads (zeros add nothing).
template <int MR, int NR>
ORDO_VNNI void tile_int8(const QuantizedActivations& a, Index i0, const std::int8_t* const (&rows)[NR], Index cols,
                         Index group, std::int32_t* dots) {
  const Index groups = cols / group;
  const __m512i ones = _mm512_set1_epi8(1);
  for (Index g = 0; g < groups; ++g) {
    const Index begin = g * group, end = begin + group;
    __m512i acc[MR][NR], weight_sum[NR];
    for (int j = 0; j < NR; ++j) {
      weight_sum[j] = _mm512_setzero_si512();
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_setzero_si512();
    }
    for (Index k = begin; k < end; k += 64) {
      const __mmask64 in = end - k >= 64 ? ~__mmask64{0} : (__mmask64{1} << (end - k)) - 1;
      __m512i w[NR];
      for (int j = 0; j < NR; ++j) {
        w[j] = _mm512_maskz_loadu_epi8(in, rows[j] + k);
        weight_sum[j] = _mm512_dpbusd_epi32(weight_sum[j], ones, w[j]);
      }
      for (int i = 0; i < MR; ++i) {
        const __m512i q = _mm512_loadu_si512(a.q_unsigned(i0 + i) + k);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], q, w[j]);
      }
    }
    for (int j = 0; j < NR; ++j) {
      const std::int32_t offset = 128 * horizontal_sum(weight_sum[j]);
      for (int i = 0; i < MR; ++i) dots[(i * NR + j) * groups + g] = horizontal_sum(acc[i][j]) - offset;
    }
  }
}

// int4, groups of a multiple of 64: the nibbles n are the unsigned operand, q the signed
// one, and dot(n - 8, q) = dot(n, q) - 8 sum(q).
template <int MR, int NR>
ORDO_VNNI void tile_int4(const QuantizedActivations& a, Index i0, const std::uint8_t* const (&rows)[NR], Index cols,
                         Index group, std::int32_t* dots) {
  const Index groups = cols / group;
  for (Index g = 0; g < groups; ++g) {
    const Index begin = g * group, end = begin + group;
    __m512i acc[MR][NR];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_si512();
    for (Index k = begin; k < end; k += 64) {
      __m512i n[NR];
      for (int j = 0; j < NR; ++j) n[j] = unpack_int4_pair(rows[j] + k / 2);
      for (int i = 0; i < MR; ++i) {
        const __m512i q = _mm512_loadu_si512(a.q(i0 + i) + k);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], n[j], q);
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j)
        dots[(i * NR + j) * groups + g] = horizontal_sum(acc[i][j]) - 8 * a.sums(i0 + i)[g];
  }
}

struct Buffers {
  std::vector<std::int32_t> dots;
  std::vector<float> weight_scales;
};

template <int MR, int NR>
ORDO_VNNI void tile(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index panel, float* y,
                    Index y_stride, Index first, Buffers& buffers) {
  const Index groups = w.groups_per_row();
  std::int32_t* dots = buffers.dots.data();
  if (w.format() == WeightFormat::Int8) {
    const std::int8_t* rows[NR];
    for (int j = 0; j < NR; ++j) rows[j] = row_of<std::int8_t>(w, r + j);
    tile_int8<MR, NR>(a, i0, rows, w.cols(), w.group(), dots);
  } else {
    const std::uint8_t* rows[NR];
    for (int j = 0; j < NR; ++j) rows[j] = row_of<std::uint8_t>(w, r + j);
    tile_int4<MR, NR>(a, i0, rows, w.cols(), w.group(), dots);
  }
  for (int j = 0; j < NR; ++j) {
    const float* scales = buffers.weight_scales.data() + (r + j - panel) * groups;
    for (int i = 0; i < MR; ++i)
      y[(i0 + i) * y_stride + (r + j - first)] = combine_avx2(dots + (i * NR + j) * groups, a.scales(i0 + i), scales, groups);
  }
}

// MR activation rows (from i0) against the weight rows [panel, end), four at a time.
template <int MR>
ORDO_VNNI void tile_row(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index panel, Index end, float* y,
                        Index y_stride, Index first, Buffers& buffers) {
  constexpr int NR = 4;
  Index r = panel;
  for (; r + NR <= end; r += NR) tile<MR, NR>(a, w, i0, r, panel, y, y_stride, first, buffers);
  for (; r < end; ++r) tile<MR, 1>(a, w, i0, r, panel, y, y_stride, first, buffers);
}

// A panel of weight rows (in L2) meets every tile of MR activation rows (in L1).
template <int MR>
ORDO_VNNI void panels(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                      Index y_stride, Buffers& buffers) {
  constexpr Index kPanel = 64;
  const Index groups = w.groups_per_row();
  for (Index panel = first; panel < first + count; panel += kPanel) {
    const Index end = std::min(first + count, panel + kPanel);
    for (Index r = panel; r < end; ++r) weight_scales(w, r, buffers.weight_scales.data() + (r - panel) * groups);
    Index i0 = 0;
    for (; i0 + MR <= a.rows(); i0 += MR) tile_row<MR>(a, w, i0, panel, end, y, y_stride, first, buffers);
    for (; i0 < a.rows(); ++i0) tile_row<1>(a, w, i0, panel, end, y, y_stride, first, buffers);
  }
}

}  // namespace

ORDO_VNNI void integer_product(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count,
                               float* y, Index y_stride) {
  thread_local Buffers buffers;
  const auto groups = static_cast<std::size_t>(w.groups_per_row());
  if (buffers.dots.size() < 4 * 4 * groups) buffers.dots.resize(4 * 4 * groups);
  if (buffers.weight_scales.size() < 64 * groups) buffers.weight_scales.resize(64 * groups);
  panels<4>(a, w, first, count, y, y_stride, buffers);
}

#endif

}  // namespace ordo::kernels::avx512
