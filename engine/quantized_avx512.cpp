#include "engine/quantized_avx512.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports wherever they are inlined (GCC bug 105593, fixed in GCC 13): nothing here reads
// an undefined value.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace ordo::kernels::avx512 {

bool takes(const WeightMatrix& w) {
  return (w.format() == WeightFormat::Int8 || w.format() == WeightFormat::Int4) && w.cols() > 0 &&
         w.cols() % 32 == 0 && w.group() % 32 == 0;
}

#if defined(__x86_64__)

namespace {

#define ORDO_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

// As engine/quantized_matvec.cpp's horizontal_sum: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).
ORDO_AVX512 inline float horizontal_sum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}

ORDO_AVX512 inline __m256 low_half(__m512 v) { return _mm512_castps512_ps256(v); }
ORDO_AVX512 inline __m256 high_half(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// A group's four chains are two vectors of sixteen lanes: ab holds the AVX2 kernel's a
// (weights 0-7 of each run) and b (8-15), cd its c (16-23) and d (24-31). The group's
// sum, (a + b) + (c + d), as the AVX2 kernel adds them.
ORDO_AVX512 inline __m256 group_sum(__m512 ab, __m512 cd) {
  return _mm256_add_ps(_mm256_add_ps(low_half(ab), high_half(ab)), _mm256_add_ps(low_half(cd), high_half(cd)));
}

// The scales of a row as float32, up to kScalesAtOnce groups at a time.
constexpr Index kScalesAtOnce = 16;

struct Int8Rows {
  const std::int8_t* values;
  std::size_t row_bytes;
  const float* scales;
  Index groups;

  // Weights [k, k + 16) of row r as float32: sign-extended from memory, converted.
  ORDO_AVX512 __m512 weights(Index r, Index k) const {
    const auto* p = reinterpret_cast<const __m128i*>(values + static_cast<std::size_t>(r) * row_bytes + k);
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p)));
  }
  // The run of 32 weights at k: [k, k + 16) and [k + 16, k + 32).
  ORDO_AVX512 void run(Index r, Index k, __m512& low, __m512& high) const {
    low = weights(r, k);
    high = weights(r, k + 16);
  }
  // Scales of groups [g, g + n) of row r (stored as float32 already).
  const float* group_scales(Index r, Index g, Index, float*) const {
    return scales + static_cast<std::size_t>(r) * groups + g;
  }
};

struct Int4Rows {
  const std::uint8_t* packed;
  std::size_t row_bytes;
  const std::uint16_t* scales;
  Index groups;

  // The 32 weights of the run at k (16 bytes): byte j holds weight j in its low nibble
  // and weight j + 16 in its high nibble, as n = q + 8. Each byte widened to a 32-bit
  // lane indexes a table of the sixteen values of q; the permute reads only the low four
  // bits of an index, so the low nibble needs no mask, and the high one is a shift away.
  ORDO_AVX512 void run(Index r, Index k, __m512& low, __m512& high) const {
    const __m512 table = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    // k is a multiple of 32 (>= 0): an unsigned halving is one shift.
    const auto* p = reinterpret_cast<const __m128i*>(packed + static_cast<std::size_t>(r) * row_bytes +
                                                     static_cast<std::size_t>(k) / 2);
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(p));
    low = _mm512_permutexvar_ps(bytes, table);
    high = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table);
  }
  // Scales of groups [g, g + n) of row r converted into `buffer` (F16C converts exactly,
  // as the AVX2 kernel's _cvtsh_ss does), sixteen in one instruction: converting each
  // group's scale alone cost three instructions a group of sixteen bytes.
  ORDO_AVX512 const float* group_scales(Index r, Index g, Index n, float* buffer) const {
    const std::uint16_t* first = scales + static_cast<std::size_t>(r) * groups + g;
    if (n == kScalesAtOnce) {
      _mm512_storeu_ps(buffer, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(first))));
    } else {
      for (Index i = 0; i < n; ++i) buffer[i] = _cvtsh_ss(first[i]);
    }
    return buffer;
  }
};

// out[i] = dot(row r[i], x) for R rows at once, group by group: each row keeps its own
// chains and totals, and they share the loads of x and the loop. One row alone waits on
// its chain of totals (an FMA's latency a group, 16 bytes for int4's groups of 32).
// kOneRun: every group is one run of 32 (int4's default), so no loop over runs.
template <int R, bool kOneRun, class Rows>
ORDO_AVX512 void dot_rows(const Rows& rows, const Index (&r)[R], Index group, Index cols, const float* x,
                          float (&out)[R]) {
  const Index groups = cols / group;
  alignas(64) float buffer[R][kScalesAtOnce];
  __m256 total[R];
  for (int i = 0; i < R; ++i) total[i] = _mm256_setzero_ps();
  for (Index first = 0; first < groups; first += kScalesAtOnce) {
    const Index n = std::min(kScalesAtOnce, groups - first);
    const float* scales[R];
    for (int i = 0; i < R; ++i) scales[i] = rows.group_scales(r[i], first, n, buffer[i]);
    for (Index g = 0; g < n; ++g) {
      const Index begin = (first + g) * group;
      __m512 ab[R], cd[R];
      for (int i = 0; i < R; ++i) ab[i] = cd[i] = _mm512_setzero_ps();
      for (Index k = begin; k < begin + (kOneRun ? 32 : group); k += 32) {
        const __m512 x_low = _mm512_load_ps(x + k), x_high = _mm512_load_ps(x + k + 16);
        for (int i = 0; i < R; ++i) {
          __m512 low, high;
          rows.run(r[i], k, low, high);
          ab[i] = _mm512_fmadd_ps(low, x_low, ab[i]);
          cd[i] = _mm512_fmadd_ps(high, x_high, cd[i]);
        }
      }
      for (int i = 0; i < R; ++i)
        total[i] = _mm256_fmadd_ps(group_sum(ab[i], cd[i]), _mm256_broadcast_ss(scales[i] + g), total[i]);
    }
  }
  for (int i = 0; i < R; ++i) out[i] = horizontal_sum(total[i]);
}

// Rows in pairs that lie half the matrix apart, i and i + count / 2: each half is then
// one sequential stream for the hardware prefetcher (two neighbouring rows interleaved
// ran int8 at a quarter of the speed, 4 against 16 GB/s, waiting on the second row's
// loads). A pair, against one row at a time: int8 in groups of 32, 16 against 8 GB/s.
template <bool kOneRun, class Rows>
ORDO_AVX512 void dot_all_rows(const Rows& rows, Index count, Index group, Index cols, const float* x, float* out) {
  const Index half = count / 2;
  for (Index i = 0; i < half; ++i) {
    float dots[2];
    dot_rows<2, kOneRun>(rows, {i, i + half}, group, cols, x, dots);
    out[i] = dots[0];
    out[i + half] = dots[1];
  }
  if (count % 2 != 0) {
    float dot[1];
    dot_rows<1, kOneRun>(rows, {count - 1}, group, cols, x, dot);
    out[count - 1] = dot[0];
  }
}

template <class Rows>
ORDO_AVX512 void dot_all(const Rows& rows, Index count, Index group, Index cols, const float* x, float* out) {
  if (group == 32)
    dot_all_rows<true>(rows, count, group, cols, x, out);
  else
    dot_all_rows<false>(rows, count, group, cols, x, out);
}

// x in a buffer aligned to a cache line, per thread (valid until the thread's next
// call): an unaligned 64-byte load spans two lines, and the kernels load x as often as
// the weights (int8 ran at 13 GB/s with x 16 bytes off a line, 18 aligned).
const float* aligned_copy(const float* x, Index n) {
  constexpr std::size_t kLine = 64 / sizeof(float);
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<std::size_t>(n) + kLine);
  float* begin = buffer.data();
  begin += (kLine - reinterpret_cast<std::uintptr_t>(begin) / sizeof(float) % kLine) % kLine;
  std::copy(x, x + n, begin);
  return begin;
}

}  // namespace

void dot_rows(const WeightMatrix& w, const float* x, float* out) {
  const float* aligned = aligned_copy(x, w.cols());
  const Index groups = w.groups_per_row();
  if (w.format() == WeightFormat::Int8)
    dot_all(Int8Rows{static_cast<const std::int8_t*>(w.data()), w.row_bytes(), static_cast<const float*>(w.scales()),
                     groups},
            w.rows(), w.group(), w.cols(), aligned, out);
  else
    dot_all(Int4Rows{static_cast<const std::uint8_t*>(w.data()), w.row_bytes(),
                     static_cast<const std::uint16_t*>(w.scales()), groups},
            w.rows(), w.group(), w.cols(), aligned, out);
}

#endif

}  // namespace ordo::kernels::avx512
