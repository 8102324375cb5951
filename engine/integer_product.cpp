#include "engine/integer_product.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <string>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/int4_product.h"
#include "engine/integer_product_amx.h"
#include "engine/integer_product_avx512.h"
#include "engine/integer_product_internal.h"
#include "engine/round_to_even.h"

#if defined(__x86_64__)
#define ORDO_AVX2 __attribute__((target("avx2,fma,f16c")))
// Unrolls a tile's loops over its rows: left rolled, GCC 12 kept a 2 x 2 tile's
// accumulators on the stack, a store and a load per multiply-add (5 % of the batch
// kernel's rate).
#define ORDO_UNROLL _Pragma("GCC unroll 8")
#endif

namespace ordo::kernels {

namespace {

using integer_detail::lane_of;
using integer_detail::weight_scale;

// Groups whose largest |x| is below this quantize to zero: 127 / amax must stay finite.
constexpr float kTinyGroup = 0x1p-120f;

template <class T>
void grow(std::vector<T>& buffer, Index size) {
  if (buffer.size() < static_cast<std::size_t>(size)) buffer.resize(static_cast<std::size_t>(size));
}

}  // namespace

namespace {

// Folds x[begin, end) into a group's largest magnitude and whether all are finite.
void fold_magnitudes(const float* x, Index begin, Index end, float& amax, bool& finite) {
  for (Index k = begin; k < end; ++k) {
    const float magnitude = std::fabs(x[k]);
    finite = finite && magnitude <= std::numeric_limits<float>::max();
    amax = std::max(amax, magnitude);
  }
}

// Whether a group quantizes to zeros (tiny, or not finite); if so q is zeroed and scale
// is 0 or NaN.
bool zero_group(float amax, bool finite, std::int8_t* q, Index n, float& scale) {
  if (finite && amax >= kTinyGroup) return false;
  std::fill(q, q + n, std::int8_t{0});
  scale = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  return true;
}

// q[k] for k in [begin, end), each added to sum.
void quantize_values(const float* x, Index begin, Index end, float inverse, std::int8_t* q, std::int32_t& sum) {
  for (Index k = begin; k < end; ++k) {
    // |x[k] * inverse| <= 127 (1 + 2^-23): it rounds into [-127, 127].
    const auto value = static_cast<std::int32_t>(round_to_even(x[k] * inverse));
    q[k] = static_cast<std::int8_t>(value);
    sum += value;
  }
}

// One group of a row: q, the sum of q and the group's scale (0 when tiny, NaN when not
// finite). Returns the scale.
float quantize_group_portable(const float* x, Index n, std::int8_t* q, std::int32_t& sum) {
  float amax = 0.0f, scale = 0.0f;
  bool finite = true;
  fold_magnitudes(x, 0, n, amax, finite);
  sum = 0;
  if (zero_group(amax, finite, q, n, scale)) return scale;
  quantize_values(x, 0, n, 127.0f / amax, q, sum);
  return amax / 127.0f;
}

#if defined(__x86_64__)
// The same numbers, 32 values at a time: the same product x * inverse and the same
// rounding (the float addition above, then an exact conversion), a maximum (exact in any
// order) and an integer sum. The portable code finishes a group's last values.
ORDO_AVX2 float quantize_group_avx2(const float* x, Index n, std::int8_t* q, std::int32_t& sum) {
  const __m256 magnitude_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  const Index vector_end = n / 32 * 32;
  __m256 amax = _mm256_setzero_ps(), not_finite = _mm256_setzero_ps();
  for (Index k = 0; k < vector_end; k += 8) {
    const __m256 magnitude = _mm256_and_ps(_mm256_loadu_ps(x + k), magnitude_mask);
    amax = _mm256_max_ps(amax, magnitude);
    not_finite = _mm256_or_ps(not_finite, _mm256_cmp_ps(magnitude, largest, _CMP_NLE_UQ));  // NaN or inf
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, amax);
  float group_max = 0.0f, scale = 0.0f;
  bool finite = _mm256_movemask_ps(not_finite) == 0;
  for (const float v : lanes) group_max = std::max(group_max, v);
  fold_magnitudes(x, vector_end, n, group_max, finite);
  sum = 0;
  if (zero_group(group_max, finite, q, n, scale)) return scale;
  const float inverse_scalar = 127.0f / group_max;
  const __m256 inverse = _mm256_set1_ps(inverse_scalar), shift = _mm256_set1_ps(12582912.0f);
  // packs leave dwords in the order 0, 2, 4, 6, 1, 3, 5, 7 of the wanted one.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i lane_sums = _mm256_setzero_si256();
  for (Index k = 0; k < vector_end; k += 32) {
    __m256i v[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 scaled = _mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * j), inverse);
      v[j] = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(scaled, shift), shift));
    }
    const __m256i bytes = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3])), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + k), bytes);
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes);
    lane_sums = _mm256_add_epi32(lane_sums, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  alignas(32) std::int32_t sums[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(sums), lane_sums);
  for (const std::int32_t lane : sums) sum += lane;
  quantize_values(x, vector_end, n, inverse_scalar, q, sum);
  return group_max / 127.0f;
}

// |q| and s (0xff where q < 0) of n values (whole runs of 32), and N of them into
// lanes[0..8): the sums of |q| where q < 0, added in 16 bits a run (pairs of at most 254:
// 64 runs at most 16256) and widened every 64 runs.
ORDO_AVX2 void split_signs_avx2(const std::int8_t* q, Index n, std::uint8_t* magnitude, std::int8_t* sign,
                                std::int32_t* lanes) {
  const __m256i zero = _mm256_setzero_si256(), ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i sums = zero;
  for (Index k = 0; k < n;) {
    __m256i pairs = zero;
    for (const Index stop = std::min(n, k + 64 * 32); k < stop; k += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + k));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(magnitude + k), _mm256_abs_epi8(v));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(sign + k), _mm256_cmpgt_epi8(zero, v));
      pairs = _mm256_sub_epi16(pairs, _mm256_maddubs_epi16(ones8, _mm256_min_epi8(v, zero)));
    }
    sums = _mm256_add_epi32(sums, _mm256_madd_epi16(pairs, ones16));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), sums);
}

ORDO_AVX2 void to_unsigned_avx2(const std::int8_t* q, Index n, std::uint8_t* u) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (Index k = 0; k < n; k += 32) {  // n is a multiple of 64
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + k));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + k), _mm256_xor_si256(v, flip));
  }
}
#endif

}  // namespace

void QuantizedActivations::quantize(ConstMatrixRef x, Index group) { quantize_on(kernel_path(), x, group); }

void QuantizedActivations::quantize(ConstMatrixRef x, Index group, RowRanges for_rows) {
  quantize_on(kernel_path(), x, group, for_rows);
}

void QuantizedActivations::quantize_on(KernelPath path, ConstMatrixRef x, Index group) {
  quantize_on(path, x, group, [](Index rows, FunctionRef<void(Index, Index)> quantize_rows) { quantize_rows(0, rows); });
}

void QuantizedActivations::quantize_on([[maybe_unused]] KernelPath path, ConstMatrixRef x, Index group,
                                       RowRanges for_rows) {
  assert(group > 0 && x.cols() % group == 0);
  rows_ = x.rows();
  cols_ = x.cols();
  group_ = group;
  groups_ = cols_ / group;
  stride_ = (cols_ + 63) / 64 * 64;
  grow(q_, rows_ * stride_);
  grow(q_unsigned_, rows_ * stride_);
  grow(scales_, rows_ * groups_);
  grow(sums_, rows_ * groups_);
  avx2_ = false;
#if defined(__x86_64__)
  avx2_ = path >= KernelPath::Avx2 && widest_kernel_path() >= KernelPath::Avx2;
#endif
  // Only where AVX2's batch tiles read them: the AVX-512 path's batch kernels do not.
  const bool avx2_batch = avx2_ && std::min(path, widest_kernel_path()) == KernelPath::Avx2;
  sign_split_ = avx2_batch && rows_ >= 4 && group_ >= 4 * 32;
  if (sign_split_) {
    grow(magnitudes_, rows_ * stride_);
    grow(signs_, rows_ * stride_);
    grow(negative_sums_, rows_ * groups_ * 8);
  }
  for_rows(rows_, [&](Index begin, Index end) { quantize_rows(x, begin, end); });
}

void QuantizedActivations::quantize_rows(ConstMatrixRef x, Index begin, Index end) {
  float (*quantize_group)(const float*, Index, std::int8_t*, std::int32_t&) = quantize_group_portable;
#if defined(__x86_64__)
  if (avx2_) quantize_group = quantize_group_avx2;
#endif
  for (Index i = begin; i < end; ++i) {
    const float* row = x.data() + i * x.stride();
    std::int8_t* q = q_.data() + i * stride_;
    for (Index g = 0; g < groups_; ++g) {
      const Index first = g * group_;
      const float scale = quantize_group(row + first, group_, q + first, sums_[static_cast<std::size_t>(i * groups_ + g)]);
      scales_[static_cast<std::size_t>(i * groups_ + g)] = scale;
    }
    std::fill(q + cols_, q + stride_, std::int8_t{0});
    std::uint8_t* u = q_unsigned_.data() + i * stride_;
#if defined(__x86_64__)
    if (avx2_) {
      to_unsigned_avx2(q, stride_, u);
      if (sign_split_) split_signs(i);
      continue;
    }
#endif
    for (Index k = 0; k < stride_; ++k) u[k] = static_cast<std::uint8_t>(q[k] + 128);
  }
}

void QuantizedActivations::split_signs([[maybe_unused]] Index i) {
#if defined(__x86_64__)
  const Index runs = group_ / 32 * 32;
  for (Index g = 0; g < groups_; ++g) {
    const Index begin = g * group_;
    split_signs_avx2(q(i) + begin, runs, magnitudes_.data() + i * stride_ + begin, signs_.data() + i * stride_ + begin,
                     negative_sums_.data() + (i * groups_ + g) * 8);
  }
#endif
}

namespace {

// ---- Portable: the definition, one product at a time.

float product_portable(const QuantizedActivations& a, Index i, const WeightMatrix& w, Index r) {
  const std::int8_t* row = w.row<std::int8_t>(r);
  const std::int8_t* q = a.q(i);
  float t[2][8] = {};
  for (Index g = 0; g < a.groups(); ++g) {
    const Index begin = g * a.group();
    std::int32_t lanes[8] = {};
    for (Index k = begin; k < begin + a.group(); ++k) lanes[lane_of(k - begin)] += q[k] * row[k];
    const float c = a.scales(i)[g] * weight_scale(w, r, g);
    for (int l = 0; l < 8; ++l) t[g % 2][l] = std::fma(static_cast<float>(lanes[l]), c, t[g % 2][l]);
  }
  float u[8];
  for (int l = 0; l < 8; ++l) u[l] = t[0][l] + t[1][l];
  return ((u[0] + u[4]) + (u[2] + u[6])) + ((u[1] + u[5]) + (u[3] + u[7]));
}

#if defined(__x86_64__)
// ---- AVX2: vpmaddubsw multiplies 32 unsigned bytes by 32 signed ones and adds adjacent
// pairs to 16 bits; vpmaddwd adds pairs of those to 32 bits: lane l holds weights 4l..4l+3
// of a run of 32, the definition's lanes.


// int8: the unsigned operand is |w| (at most 128), the signed one q with w's sign (at most
// 127), so a pair sums to at most 2 * 128 * 127 < 2^15: vpmaddubsw never saturates.
ORDO_AVX2 inline __m256i lanes_int8(__m256i w, __m256i w_magnitude, __m256i q) {
  const __m256i pairs = _mm256_maddubs_epi16(w_magnitude, _mm256_sign_epi8(q, w));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

ORDO_AVX2 inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// int8 tiles of 4 activation rows x 2 weight rows take a second formulation without
// vpsignb, which competes with the multiplies: on Zen 4 running AVX2, the 4 x 2 loop ran
// 2.5 vector instructions a cycle with it and 3 without. With s = 0xff where q < 0
// (else 0), w ^ s is w where q >= 0 and -w - 1 where q < 0, so |q| * (w ^ s) =
// q * w - [q < 0] |q|, and
//   P = sum |q| (w ^ s) + N,   N = sum over q < 0 of |q|  (per lane, per group),
// where |q|, s and N depend on the activations alone: computed once as they are
// quantized (QuantizedActivations::sign_split) and shared by every weight row. The
// weights are read as stored, once per tile. |q| <= 127 and w ^ s in [-128, 127], so a
// pair sums to at most 2 * 127 * 128 < 2^15: vpmaddubsw never saturates, and P is exact
// as the definition wants, stored weights of -128 included. The weights' own sign split
// (the formulation before this one) cost a pass over each panel's weights per product,
// and two more vector instructions a step. One thread of an Intel Xeon on the AVX2
// path, weights in cache: 16 rows of activations 53 -> 58 GMAC/s on 768 columns,
// 61 -> 66 on 2048 (f32's sgemm: 26-29); 512 rows 60 -> 62 and 67 -> 69 (sgemm: 54-56).

// p[i][j] += sum |q_i| (w_j ^ s_i) over n weights (a multiple of 32, at least 32) for
// the four activation rows at magnitude, magnitude + stride, ... (their signs at sign,
// sign + stride, ...) and the two weight rows w, w + w_stride. Written in assembly: the 8
// accumulators (left to the compiler, which has ymm0-7 for them), both weight runs, a
// row's |q| and s, two products and a constant are 15 of the 16 registers, and GCC 12
// given intrinsics kept some accumulators on the stack, a store and a load each a step.
ORDO_AVX2 inline __attribute__((always_inline)) void runs_int8_4x2(const std::uint8_t* magnitude,
                                                                   const std::int8_t* sign, Index stride,
                                                                   const std::int8_t* w, Index w_stride, Index n,
                                                                   __m256i (&p)[4][2]) {
  const std::uint8_t* const end = magnitude + n;
  const Index stride3 = 3 * stride;
#define ORDO_PAIR(WEIGHTS, PRODUCT, ACC)                  \
  "vpxor %%ymm11, " WEIGHTS ", " PRODUCT "\n\t"         \
  "vpmaddubsw " PRODUCT ", %%ymm10, " PRODUCT "\n\t"    \
  "vpmaddwd %%ymm14, " PRODUCT ", " PRODUCT "\n\t"      \
  "vpaddd " PRODUCT ", " ACC ", " ACC "\n\t"
#define ORDO_ROW(ROW, ACC0, ACC1)                              \
  "vmovdqu (%[magnitude]" ROW "), %%ymm10\n\t"             \
  "vmovdqu (%[sign]" ROW "), %%ymm11\n\t"                  \
  ORDO_PAIR("%%ymm8", "%%ymm12", ACC0) ORDO_PAIR("%%ymm9", "%%ymm13", ACC1)
  asm volatile(
      "vpcmpeqw %%ymm14, %%ymm14, %%ymm14\n\t"
      "vpsrlw $15, %%ymm14, %%ymm14\n\t"  // 1 in each 16-bit lane
      "1:\n\t"
      "vmovdqu (%[w]), %%ymm8\n\t"
      "vmovdqu (%[w],%[w_stride]), %%ymm9\n\t"
      ORDO_ROW("", "%[p00]", "%[p01]")
      ORDO_ROW(",%[stride]", "%[p10]", "%[p11]")
      ORDO_ROW(",%[stride],2", "%[p20]", "%[p21]")
      ORDO_ROW(",%[stride3]", "%[p30]", "%[p31]")
      "add $32, %[magnitude]\n\t"
      "add $32, %[sign]\n\t"
      "add $32, %[w]\n\t"
      "cmp %[end], %[magnitude]\n\t"
      "jb 1b"
      : [magnitude] "+r"(magnitude), [sign] "+r"(sign), [w] "+r"(w), [p00] "+x"(p[0][0]), [p01] "+x"(p[0][1]),
        [p10] "+x"(p[1][0]), [p11] "+x"(p[1][1]), [p20] "+x"(p[2][0]), [p21] "+x"(p[2][1]), [p30] "+x"(p[3][0]),
        [p31] "+x"(p[3][1])
      : [stride] "r"(stride), [stride3] "r"(stride3), [w_stride] "r"(w_stride), [end] "r"(end)
      : "cc", "memory", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14");
#undef ORDO_ROW
#undef ORDO_PAIR
}

// The weight rows of a tile and their scales.
template <int NR>
struct TileRows {
  const std::byte* values[NR];
  const float* scales[NR];
  float scale(int j, Index g) const { return scales[j][g]; }
};

// The definition's lanes P of group g for MR activation rows (from i0) and NR weight rows.
// kSignSplit: 4 x 2 int8 tiles of activations with their sign split, through runs_int8_4x2.
template <int MR, int NR, bool kSignSplit = false>
ORDO_AVX2 inline __attribute__((always_inline)) void group_lanes(const QuantizedActivations& a, Index i0,
                                                                 const TileRows<NR>& rows, Index g,
                                                                 __m256i (&p)[MR][NR]) {
  const Index begin = g * a.group(), end = begin + a.group();
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i)
    ORDO_UNROLL
    for (int j = 0; j < NR; ++j) p[i][j] = _mm256_setzero_si256();
  Index k = begin;
  // Kept out of the other tiles' code: with this asm beside them GCC spilled the 4 x 2
  // accumulators of the tiles int4 had here (25 -> 19 GMAC/s).
  if constexpr (kSignSplit) {
    static_assert(MR == 4 && NR == 2);
    const Index runs_end = begin + (end - begin) / 32 * 32;
    const auto* w0 = reinterpret_cast<const std::int8_t*>(rows.values[0]);
    const auto* w1 = reinterpret_cast<const std::int8_t*>(rows.values[1]);
    runs_int8_4x2(a.magnitudes(i0) + begin, a.signs(i0) + begin, a.magnitudes(i0 + 1) - a.magnitudes(i0), w0 + begin,
                  w1 - w0, runs_end - begin, p);
    for (int i = 0; i < MR; ++i) {
      const __m256i n = load(a.negative_sums(i0 + i) + g * 8);
      for (int j = 0; j < NR; ++j) p[i][j] = _mm256_add_epi32(p[i][j], n);
    }
    k = runs_end;
  }
  for (; k + 32 <= end; k += 32) {
    __m256i v[NR], magnitude[NR];
    ORDO_UNROLL
    for (int j = 0; j < NR; ++j) {
      v[j] = load(reinterpret_cast<const std::int8_t*>(rows.values[j]) + k);
      magnitude[j] = _mm256_abs_epi8(v[j]);
    }
    ORDO_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m256i q = load(a.q(i0 + i) + k);
      ORDO_UNROLL
      for (int j = 0; j < NR; ++j) p[i][j] = _mm256_add_epi32(p[i][j], lanes_int8(v[j], magnitude[j], q));
    }
  }
  if (k < end)  // the rest of the group, fewer than 32 weights: into their lanes one by one
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) {
        alignas(32) std::int32_t lanes[8] = {};
        const auto* values = reinterpret_cast<const std::int8_t*>(rows.values[j]);
        for (Index t = k; t < end; ++t) lanes[lane_of(t - begin)] += a.q(i0 + i)[t] * values[t];
        p[i][j] = _mm256_add_epi32(p[i][j], _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes)));
      }
}

// Group g's float step into the totals of its parity, t.
template <int MR, int NR, bool kSignSplit = false>
ORDO_AVX2 inline __attribute__((always_inline)) void group_step(const QuantizedActivations& a, Index i0,
                                                                const TileRows<NR>& rows, Index g,
                                                                __m256 (&t)[MR][NR]) {
  __m256i p[MR][NR];
  group_lanes<MR, NR, kSignSplit>(a, i0, rows, g, p);
  ORDO_UNROLL
  for (int j = 0; j < NR; ++j) {
    const float scale = rows.scale(j, g);
    ORDO_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m256 c = _mm256_set1_ps(a.scales(i0 + i)[g] * scale);
      t[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[i][j]), c, t[i][j]);
    }
  }
}

// MR activation rows (from i0) times NR weight rows (from r): y[(i0 + i) * y_stride + r + j - first].
// Weight rows r, r + spacing, ..., r + (NR - 1) spacing.
template <int MR, int NR, bool kSignSplit = false>
ORDO_AVX2 void tile_avx2(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index spacing,
                         Index first, float* y, Index y_stride) {
  TileRows<NR> rows;
  ORDO_UNROLL
  for (int j = 0; j < NR; ++j) {
    rows.values[j] = w.row<std::byte>(r + j * spacing);
    rows.scales[j] = w.row_scales<float>(r + j * spacing);
  }
  __m256 even[MR][NR], odd[MR][NR];
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i)
    ORDO_UNROLL
    for (int j = 0; j < NR; ++j) even[i][j] = odd[i][j] = _mm256_setzero_ps();
  for (Index g = 0; g < a.groups(); g += 2) {
    group_step<MR, NR, kSignSplit>(a, i0, rows, g, even);
    if (g + 1 < a.groups()) group_step<MR, NR, kSignSplit>(a, i0, rows, g + 1, odd);
  }
  if constexpr (MR == 4 && NR == 2) {
    if (spacing == 1) {  // the panel's tiles: row i's two results side by side
      const __m256 sums = integer_detail::final_sums8(reinterpret_cast<const __m256(&)[8]>(even),
                                                      reinterpret_cast<const __m256(&)[8]>(odd));
      float* const out = y + r - first;
      const __m128 low = _mm256_castps256_ps128(sums), high = _mm256_extractf128_ps(sums, 1);
      _mm_storel_pi(reinterpret_cast<__m64*>(out + i0 * y_stride), low);
      _mm_storeh_pi(reinterpret_cast<__m64*>(out + (i0 + 1) * y_stride), low);
      _mm_storel_pi(reinterpret_cast<__m64*>(out + (i0 + 2) * y_stride), high);
      _mm_storeh_pi(reinterpret_cast<__m64*>(out + (i0 + 3) * y_stride), high);
      return;
    }
  }
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i)
    ORDO_UNROLL
    for (int j = 0; j < NR; ++j)
      y[(i0 + i) * y_stride + (r + j * spacing - first)] = integer_detail::final_sum(even[i][j], odd[i][j]);
}

// Activation rows i0 .. i0 + MR - 1 against the weight rows [begin, end), NR at a time;
// sign_split: 4 x 2 int8 tiles through runs_int8_4x2.
template <int MR, int NR>
ORDO_AVX2 void panel_avx2(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index begin, Index end,
                          Index first, float* y, Index y_stride, bool sign_split = false) {
  Index r = begin;
  if constexpr (MR == 4 && NR == 2) {
    if (sign_split)
      for (; r + NR <= end; r += NR) tile_avx2<MR, NR, true>(a, w, i0, r, 1, first, y, y_stride);
  }
  for (; r + NR <= end; r += NR) tile_avx2<MR, NR>(a, w, i0, r, 1, first, y, y_stride);
  for (; r < end; ++r) tile_avx2<MR, 1>(a, w, i0, r, 1, first, y, y_stride);
}

// One row of activations streams the matrix once, NR rows at a time half the matrix
// apart (two sequential streams for the hardware prefetcher); more rows: a panel of 64
// weight rows, streamed into cache first, meets every tile of activation rows (in L1),
// four rows a tile where there are four, then two, then one. int8 4 x 2 tiles take
// runs_int8_4x2 where the activations have their sign split (groups of at least four runs).
ORDO_AVX2 void product_avx2(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                            Index y_stride) {
  constexpr int NR = 2;
  if (a.rows() == 1) {
    const Index half = count / NR;
    for (Index r = first; r < first + half; ++r) tile_avx2<1, NR>(a, w, 0, r, half, first, y, y_stride);
    for (Index r = first + NR * half; r < first + count; ++r) tile_avx2<1, 1>(a, w, 0, r, 1, first, y, y_stride);
    return;
  }
  const bool sign_split = w.format() == WeightFormat::Int8 && a.sign_split();
  constexpr Index kPanel = 64;
  for (Index panel = first; panel < first + count; panel += kPanel) {
    const Index end = std::min(first + count, panel + kPanel);
    integer_detail::stream_in(w, panel, end);
    Index i0 = 0;
    for (; i0 + 4 <= a.rows(); i0 += 4) panel_avx2<4, NR>(a, w, i0, panel, end, first, y, y_stride, sign_split);
    for (; i0 + 2 <= a.rows(); i0 += 2) panel_avx2<2, NR>(a, w, i0, panel, end, first, y, y_stride);
    for (; i0 < a.rows(); ++i0) panel_avx2<1, NR>(a, w, i0, panel, end, first, y, y_stride);
  }
}
#endif

}  // namespace

void integer_product(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                     Index y_stride) {
  integer_product_on(kernel_path(), a, w, first, count, y, y_stride);
}

void integer_product_on(KernelPath path, const QuantizedActivations& a, const WeightMatrix& w, Index first,
                        Index count, float* y, Index y_stride) {
  if (path > widest_kernel_path())
    throw Error("kernels::integer_product_on",
                "the " + std::string(kernel_path_name(path)) + " path on a CPU whose widest is " +
                    std::string(kernel_path_name(widest_kernel_path())),
                "ask for a path at most kernels::widest_kernel_path()");
  assert(integer_product_takes(w) && a.cols() == w.cols() && a.group() == w.group());
  if (w.format() == WeightFormat::Int4) return int4_product(path, a, w, first, count, y, y_stride);
#if defined(__x86_64__)
  // Decode steps (a row or a few) stream faster through the AVX2 kernels: int8 decoded
  // the bench model at 3.8x f32 against 3.2x (one thread). The same numbers either way.
  const bool few_rows = a.rows() < 4;
  if (path == KernelPath::Amx && amx::takes(a, w)) return amx::integer_product(a, w, first, count, y, y_stride);
  if (path >= KernelPath::Avx512 && avx512::integer_product_takes(w) && !few_rows)
    return avx512::integer_product(a, w, first, count, y, y_stride);
  if (path >= KernelPath::Avx2) return product_avx2(a, w, first, count, y, y_stride);
#endif
  for (Index r = first; r < first + count; ++r)
    for (Index i = 0; i < a.rows(); ++i) y[i * y_stride + (r - first)] = product_portable(a, i, w, r);
}

}  // namespace ordo::kernels
