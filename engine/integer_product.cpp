#include "engine/integer_product.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <string>

#include "engine/error.h"
#include "engine/half.h"
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

// q[k] for k in [begin, end), and 8 * each into its lane of offsets.
void quantize_values(const float* x, Index begin, Index end, float inverse, std::int8_t* q, std::int32_t* offsets) {
  for (Index k = begin; k < end; ++k) {
    // |x[k] * inverse| <= 127 (1 + 2^-23): it rounds into [-127, 127].
    const auto value = static_cast<std::int32_t>(round_to_even(x[k] * inverse));
    q[k] = static_cast<std::int8_t>(value);
    offsets[lane_of(k)] += 8 * value;
  }
}

// One group of a row: q and the group's scale (0 when tiny, NaN when not finite), and
// 8 * the lane sums of q into offsets. Returns the scale.
float quantize_group_portable(const float* x, Index n, std::int8_t* q, std::int32_t* offsets) {
  float amax = 0.0f, scale = 0.0f;
  bool finite = true;
  fold_magnitudes(x, 0, n, amax, finite);
  std::fill(offsets, offsets + 8, 0);
  if (zero_group(amax, finite, q, n, scale)) return scale;
  quantize_values(x, 0, n, 127.0f / amax, q, offsets);
  return amax / 127.0f;
}

#if defined(__x86_64__)
// The same numbers, 32 values at a time: the same product x * inverse and the same
// rounding (the float addition above, then an exact conversion), a maximum (exact in any
// order) and integer lane sums. The portable code finishes a group's last values.
ORDO_AVX2 float quantize_group_avx2(const float* x, Index n, std::int8_t* q, std::int32_t* offsets) {
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
  std::fill(offsets, offsets + 8, 0);
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
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(offsets), _mm256_slli_epi32(lane_sums, 3));
  quantize_values(x, vector_end, n, inverse_scalar, q, offsets);
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
  grow(nibble_offsets_, rows_ * groups_ * 8);
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
  // Where x86 int4 kernels read the pair order (the portable path never does): every one
  // in groups of 32; in groups of a multiple of 64 the one-row kernel (row_int4_groups).
  pair_order_ = avx2_ && ((group_ == 32 && cols_ % 64 == 0) || (group_ % 64 == 0 && rows_ == 1));
  pairs_ = pair_order_ && group_ == 32;
  if (pair_order_) grow(pair_q_, rows_ * stride_);
  if (pairs_) {
    grow(pair_minus_offsets_, rows_ * groups_ * 8);
    grow(pair_scales_, rows_ * groups_ * 8);
  }
  for_rows(rows_, [&](Index begin, Index end) { quantize_rows(x, begin, end); });
}

void QuantizedActivations::quantize_rows(ConstMatrixRef x, Index begin, Index end) {
  float (*quantize_group)(const float*, Index, std::int8_t*, std::int32_t*) = quantize_group_portable;
#if defined(__x86_64__)
  if (avx2_) quantize_group = quantize_group_avx2;
#endif
  for (Index i = begin; i < end; ++i) {
    const float* row = x.data() + i * x.stride();
    std::int8_t* q = q_.data() + i * stride_;
    for (Index g = 0; g < groups_; ++g) {
      const Index first = g * group_;
      const float scale = quantize_group(row + first, group_, q + first, nibble_offsets_.data() + (i * groups_ + g) * 8);
      scales_[static_cast<std::size_t>(i * groups_ + g)] = scale;
    }
    std::fill(q + cols_, q + stride_, std::int8_t{0});
    if (pair_order_) arrange_pair_order(i);
    if (pairs_) arrange_pairs(i);
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

void QuantizedActivations::arrange_pair_order(Index i) {
  const std::int8_t* from = q(i);
  std::int8_t* to = pair_q_.data() + i * stride_;
  for (Index k = 0; k < cols_; k += 64) {
    std::copy_n(from + k, 16, to + k);
    std::copy_n(from + k + 32, 16, to + k + 16);
    std::copy_n(from + k + 16, 16, to + k + 32);
    std::copy_n(from + k + 48, 16, to + k + 48);
  }
}

void QuantizedActivations::arrange_pairs(Index i) {
  for (Index g = 0; g < groups_; g += 2) {
    const std::int32_t* offsets = nibble_offsets(i) + g * 8;
    std::int32_t* minus = pair_minus_offsets_.data() + i * groups_ * 8 + g * 8;
    float* pair_scales = pair_scales_.data() + i * groups_ * 8 + g * 8;
    for (int l = 0; l < 16; ++l) {
      const int group = l / 4 % 2, lane = l % 4 + l / 8 * 4;  // lanes [g 0-3, g + 1 0-3, g 4-7, g + 1 4-7]
      minus[l] = -offsets[group * 8 + lane];
      pair_scales[l] = scales(i)[g + group];
    }
  }
}

namespace {

// ---- Portable: the definition, one product at a time.

// Weight k of a row as an integer: the int8 value, or an int4 nibble minus 8. Runs of 32
// int4 weights are 16 bytes: low nibbles hold weights 0..15, high ones 16..31.
int weight_at(const WeightMatrix& w, const void* row, Index k) {
  if (w.format() == WeightFormat::Int8) return static_cast<const std::int8_t*>(row)[k];
  const std::uint8_t byte = static_cast<const std::uint8_t*>(row)[k / kInt4Run * 16 + k % 16];
  return (k % kInt4Run < 16 ? byte & 0x0f : byte >> 4) - 8;
}

float product_portable(const QuantizedActivations& a, Index i, const WeightMatrix& w, Index r) {
  const void* row = w.row<std::byte>(r);
  const std::int8_t* q = a.q(i);
  float t[2][8] = {};
  for (Index g = 0; g < a.groups(); ++g) {
    const Index begin = g * a.group();
    std::int32_t lanes[8] = {};
    for (Index k = begin; k < begin + a.group(); ++k) lanes[lane_of(k - begin)] += q[k] * weight_at(w, row, k);
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

// A run of 32 int4 weights as 32 unsigned bytes n (0..15) in weight order.
ORDO_AVX2 inline __m256i unpack_int4(const std::uint8_t* run) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(run));
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i low = _mm_and_si128(bytes, mask), high = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
  return _mm256_set_m128i(high, low);
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
  const std::byte* scales[NR];
  bool int4;
  // Group g's weight scale of row j (int4's F16 converted exactly).
  ORDO_AVX2 float scale(int j, Index g) const {
    if (int4) return _cvtsh_ss(reinterpret_cast<const std::uint16_t*>(scales[j])[g]);
    return reinterpret_cast<const float*>(scales[j])[g];
  }
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
  if (rows.int4) {
    // A run's vpmaddubsw pairs are at most 2 x 15 x 127 = 3810 in magnitude: 8 runs add
    // up in 16 bits (30480) before one vpmaddwd widens them, instead of one a run.
    constexpr Index kRunsIn16Bits = 8;
    while (k < end) {
      const Index chunk_end = std::min(end, k + kRunsIn16Bits * kInt4Run);
      __m256i pairs[MR][NR];
      ORDO_UNROLL
      for (int i = 0; i < MR; ++i)
        ORDO_UNROLL
        for (int j = 0; j < NR; ++j) pairs[i][j] = _mm256_setzero_si256();
      for (; k < chunk_end; k += kInt4Run) {
        __m256i n[NR];
        ORDO_UNROLL
        for (int j = 0; j < NR; ++j) n[j] = unpack_int4(reinterpret_cast<const std::uint8_t*>(rows.values[j]) + k / 2);
        ORDO_UNROLL
        for (int i = 0; i < MR; ++i) {
          const __m256i q = load(a.q(i0 + i) + k);
          ORDO_UNROLL
          for (int j = 0; j < NR; ++j) pairs[i][j] = _mm256_add_epi16(pairs[i][j], _mm256_maddubs_epi16(n[j], q));
        }
      }
      ORDO_UNROLL
      for (int i = 0; i < MR; ++i)
        ORDO_UNROLL
        for (int j = 0; j < NR; ++j)
          p[i][j] = _mm256_add_epi32(p[i][j], _mm256_madd_epi16(pairs[i][j], _mm256_set1_epi16(1)));
    }
    ORDO_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m256i offsets = load(a.nibble_offsets(i0 + i) + g * 8);
      ORDO_UNROLL
      for (int j = 0; j < NR; ++j) p[i][j] = _mm256_sub_epi32(p[i][j], offsets);
    }
    return;
  }
  // Kept out of the other tiles' code: with this asm beside them GCC spilled int4's 4 x 2
  // accumulators (25 -> 19 GMAC/s).
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
  rows.int4 = w.format() == WeightFormat::Int4;
  ORDO_UNROLL
  for (int j = 0; j < NR; ++j) {
    rows.values[j] = w.row<std::byte>(r + j * spacing);
    rows.scales[j] = w.row_scales<std::byte>(r + j * spacing);
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

// Which of 8 groups' c a step of two takes: lanes 0-3 group 2p, lanes 4-7 group 2p + 1.
alignas(32) constexpr std::int32_t kPairPicks[4][8] = {
    {0, 0, 0, 0, 1, 1, 1, 1}, {2, 2, 2, 2, 3, 3, 3, 3}, {4, 4, 4, 4, 5, 5, 5, 5}, {6, 6, 6, 6, 7, 7, 7, 7}};

// Weight rows r, r + spacing, ..., r + (NR - 1) spacing of an int4 matrix: their packed
// bytes and F16 scales, as the one-row kernels walk them.
template <int NR>
struct Int4Rows {
  const std::uint8_t* values[NR];
  const std::uint16_t* scales[NR];
  Int4Rows(const WeightMatrix& w, Index r, Index spacing) {
    for (int j = 0; j < NR; ++j) {
      values[j] = w.row<std::uint8_t>(r + j * spacing);
      scales[j] = w.row_scales<std::uint16_t>(r + j * spacing);
    }
  }
};

// row_int4_pairs' c of the last n < 8 groups of a row, from g (the rest 0): apart, so
// that the loop keeps its registers.
template <int NR>
ORDO_AVX2 __attribute__((noinline)) void last_block_scales(const float* activation_scales,
                                                           const std::uint16_t* const (&scales)[NR], Index g, Index n,
                                                           __m256 (&block_c)[NR]) {
  alignas(32) float s[8] = {};
  std::copy_n(activation_scales, n, s);
  for (int j = 0; j < NR; ++j) {
    alignas(16) std::uint16_t w[8] = {};
    std::copy_n(scales[j] + g, n, w);
    block_c[j] = _mm256_mul_ps(_mm256_load_ps(s), _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(w))));
  }
}

// int4 groups of 32, one activation row (a decode step), two groups a step: the 32
// packed bytes of groups g and g + 1 (g even) unpack in three instructions to their low
// nibbles [g 0-15, g+1 0-15] and high ones [g 16-31, g+1 16-31], against q arranged to
// match (QuantizedActivations::pair_q), so vpmaddwd's lanes are [g 0-3, g+1 0-3] and
// [g 4-7, g+1 4-7], and each group's float step is half of two vector ones. c_g = s_g
// w_g is computed 8 groups at a time (one conversion and one multiply for 8, 6 % faster
// than converting each step's two) and a step picks its two. The totals keep that
// order: "low" holds the even chain's lanes 0-3 and the odd chain's 0-3, "high" their
// 4-7, put back for the sum.
// Rows r, r + spacing, ..., r + (NR - 1) spacing.
template <int NR>
ORDO_AVX2 void row_int4_pairs(const QuantizedActivations& a, const WeightMatrix& w, Index i, Index r, Index spacing,
                              Index first, float* y) {
  const Int4Rows<NR> rows(w, r, spacing);
  const __m256i mask = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  const std::int8_t* q = a.pair_q(i);
  const std::int32_t* minus_offsets = a.pair_minus_offsets(i);
  __m256 low[NR], high[NR], block_c[NR];
  for (int j = 0; j < NR; ++j) low[j] = high[j] = block_c[j] = _mm256_setzero_ps();
  for (Index k = 0; k < a.cols(); k += 64) {
    const Index g = k / 32;
    if (g % 8 == 0) {  // c_g = s_g w_g of the next 8 groups, for each row
      if (a.groups() - g >= 8) {
        const __m256 s = _mm256_loadu_ps(a.scales(i) + g);
        for (int j = 0; j < NR; ++j)
          block_c[j] =
              _mm256_mul_ps(s, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.scales[j] + g))));
      } else {
        last_block_scales<NR>(a.scales(i) + g, rows.scales, g, a.groups() - g, block_c);
      }
    }
    // This step's two: c_g in lanes 0-3, c_g+1 in lanes 4-7.
    const __m256i pick = load(kPairPicks[g % 8 / 2]);
    const __m256i q_low = load(q + k), q_high = load(q + k + 32);
    const __m256i minus_low = load(minus_offsets + g * 8), minus_high = load(minus_offsets + g * 8 + 8);
    for (int j = 0; j < NR; ++j) {
      const __m256i bytes = load(rows.values[j] + k / 2);
      const __m256i n_low = _mm256_and_si256(bytes, mask), n_high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
      const __m256i p_low = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(n_low, q_low), ones), minus_low);
      const __m256i p_high = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(n_high, q_high), ones), minus_high);
      const __m256 c = _mm256_permutevar8x32_ps(block_c[j], pick);
      low[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p_low), c, low[j]);
      high[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p_high), c, high[j]);
    }
  }
  for (int j = 0; j < NR; ++j) {
    const __m256 even = _mm256_permute2f128_ps(low[j], high[j], 0x20), odd = _mm256_permute2f128_ps(low[j], high[j], 0x31);
    y[r + j * spacing - first] = integer_detail::final_sum(even, odd);
  }
}

// int4 groups of 32 for MR activation rows (from i0) against weight row r, two groups a
// step as row_int4_pairs does (the same unpacking, lanes and float steps): the weights'
// 32 bytes unpack once for every row. Each row's c_g = s_g w_g is computed 8 groups at a
// time into c and picked from memory, and the totals are each row's low and high: 2 MR
// registers, where the 4 x 2 tiles of tile_avx2 kept 16 totals and 8 sums in 16
// registers and spilled, with a float step for every 32 weights.
template <int MR>
ORDO_AVX2 void tile_int4_pairs(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index first,
                               float* y, Index y_stride) {
  const std::uint8_t* row = w.row<std::uint8_t>(r);
  const std::uint16_t* scales = w.row_scales<std::uint16_t>(r);
  const std::int8_t* q[MR];
  const std::int32_t* minus_offsets[MR];
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i) {
    q[i] = a.pair_q(i0 + i);
    minus_offsets[i] = a.pair_minus_offsets(i0 + i);
  }
  const __m256i mask = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  __m256 low[MR], high[MR];
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i) low[i] = high[i] = _mm256_setzero_ps();
  alignas(32) float c[MR][8] = {};
  for (Index k = 0; k < a.cols(); k += 64) {
    const Index g = k / 32;
    if (g % 8 == 0) {  // c_g = s_g w_g of the next 8 groups (0 past the last), for each row
      if (a.groups() - g >= 8) {
        const __m256 w_scales = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + g)));
        ORDO_UNROLL
        for (int i = 0; i < MR; ++i) _mm256_store_ps(c[i], _mm256_mul_ps(_mm256_loadu_ps(a.scales(i0 + i) + g), w_scales));
      } else {
        const Index n = a.groups() - g;
        alignas(16) std::uint16_t weight_scales[8] = {};
        std::copy_n(scales + g, n, weight_scales);
        const __m256 w_scales = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(weight_scales)));
        for (int i = 0; i < MR; ++i) {
          alignas(32) float s[8] = {};
          std::copy_n(a.scales(i0 + i) + g, n, s);
          _mm256_store_ps(c[i], _mm256_mul_ps(_mm256_load_ps(s), w_scales));
        }
      }
    }
    // This step's two: c_g in lanes 0-3, c_g+1 in lanes 4-7.
    const __m256i pick = load(kPairPicks[g % 8 / 2]);
    const __m256i bytes = load(row + k / 2);
    const __m256i n_low = _mm256_and_si256(bytes, mask), n_high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
    ORDO_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m256i p_low = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(n_low, load(q[i] + k)), ones),
                                             load(minus_offsets[i] + g * 8));
      const __m256i p_high = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(n_high, load(q[i] + k + 32)), ones),
                                              load(minus_offsets[i] + g * 8 + 8));
      const __m256 step_c = _mm256_permutevar8x32_ps(_mm256_load_ps(c[i]), pick);
      low[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p_low), step_c, low[i]);
      high[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p_high), step_c, high[i]);
    }
  }
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i) {
    const __m256 even = _mm256_permute2f128_ps(low[i], high[i], 0x20), odd = _mm256_permute2f128_ps(low[i], high[i], 0x31);
    y[(i0 + i) * y_stride + r - first] = integer_detail::final_sum(even, odd);
  }
}

// ---- int4 in groups of a multiple of 64, one activation row (a decode step): two runs or
// more a group, one float step a group. A step's 32 bytes unpack as row_int4_pairs' do
// (both runs' low nibbles, then the high ones) against the pair-ordered q, but both runs
// belong to one group: their vpmaddubsw pairs add up in 16 bits, step after step, and at
// the end of the group (or of kFoldSteps steps) one fold, adding the two runs' halves,
// and one vpmaddwd give the group's eight lanes in the definition's order. The per-group
// tiles (tile_avx2) convert, scale and add eight lanes for every run of 32 and widen
// every run to 32 bits. One thread, one row, 768 weight rows of 2048 on the AVX2 path:
// groups of 64 25.8 -> 45.7 GMAC/s, 128 32.8 -> 55.7, 256 37.0 -> 60.6 (groups of 32,
// row_int4_pairs: 38.3). In batches the per-group tiles stay: a tile of 4 activation
// rows against one weight row in this order ran slower than their 4 x 2 tiles for groups
// of 64 and no faster above (so did AVX-512 tiles of 4 x 2 taking two groups a step).

// Steps of 64 weights whose pairs add up in 16 bits: a pair is at most 2 x 15 x 127 in
// magnitude, and a fold adds two runs' pairs, so 4 steps reach 16 x 1905 = 30480 < 2^15.
constexpr Index kFoldSteps = 4;

// The fold: [low's halves added, high's halves added] as eight 32-bit lanes 0-7 of the
// two runs together: [low 0, high 1] + [low 1, high 0], one lane-crossing instruction.
ORDO_AVX2 inline __m256i fold_runs(__m256i low, __m256i high) {
  const __m256i folded =
      _mm256_add_epi16(_mm256_blend_epi32(low, high, 0xf0), _mm256_permute2x128_si256(low, high, 0x21));
  return _mm256_madd_epi16(folded, _mm256_set1_epi16(1));
}

// Adds `steps` steps of 64 weights (at most kFoldSteps) of one activation row (q in the
// pair order) against NR weight rows (their bytes at rows[j]) to their lanes p: kSteps of
// them when it is not 0 (the loop unrolled).
template <int NR, int kSteps>
ORDO_AVX2 inline __attribute__((always_inline)) void add_fold_one_row(const std::int8_t* q,
                                                                      const std::uint8_t* const (&rows)[NR], int steps,
                                                                      __m256i (&p)[NR]) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  __m256i low[NR], high[NR];
  ORDO_UNROLL
  for (int j = 0; j < NR; ++j) low[j] = high[j] = _mm256_setzero_si256();
  const int count = kSteps > 0 ? kSteps : steps;
  ORDO_UNROLL
  for (int step = 0; step < count; ++step) {
    const __m256i q_low = load(q + 64 * step), q_high = load(q + 64 * step + 32);
    ORDO_UNROLL
    for (int j = 0; j < NR; ++j) {
      const __m256i bytes = load(rows[j] + 32 * step);
      low[j] = _mm256_add_epi16(low[j], _mm256_maddubs_epi16(_mm256_and_si256(bytes, mask), q_low));
      high[j] = _mm256_add_epi16(high[j],
                                 _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask), q_high));
    }
  }
  ORDO_UNROLL
  for (int j = 0; j < NR; ++j) p[j] = _mm256_add_epi32(p[j], fold_runs(low[j], high[j]));
}

// One activation row (a decode step) against NR weight rows r, r + spacing, ...: each
// group's float step t = fma(P, c_g, t), c_g = s_g w_g computed 8 groups at a time as
// row_int4_pairs does and read back broadcast (a permute to pick it cost 10 % more).
// Groups go two at a time, so that each parity's totals stay in registers; the
// pointers walk the row. kSteps: a group's steps of 64 weights (1, 2 or 4, unrolled), or
// 0 for any multiple of 64 (in folds of kFoldSteps).
struct GroupCursor {
  const std::int8_t* q;
  const std::int32_t* offsets;
};

template <int NR, int kSteps>
ORDO_AVX2 inline __attribute__((always_inline)) void group_step_one_row(GroupCursor& at, std::uint8_t const* (&rows)[NR],
                                                                        Index group, const float (&c)[NR][8], Index n,
                                                                        __m256 (&totals)[NR]) {
  __m256i p[NR];
  ORDO_UNROLL
  for (int j = 0; j < NR; ++j) p[j] = _mm256_setzero_si256();
  if constexpr (kSteps > 0) {
    add_fold_one_row<NR, kSteps>(at.q, rows, kSteps, p);
  } else {
    for (Index fold = 0; fold < group; fold += 64 * kFoldSteps) {
      const std::uint8_t* fold_rows[NR];
      for (int j = 0; j < NR; ++j) fold_rows[j] = rows[j] + fold / 2;
      add_fold_one_row<NR, 0>(at.q + fold, fold_rows, static_cast<int>(std::min<Index>(kFoldSteps, (group - fold) / 64)),
                              p);
    }
  }
  const __m256i offsets = load(at.offsets);
  ORDO_UNROLL
  for (int j = 0; j < NR; ++j)
    totals[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(p[j], offsets)), _mm256_set1_ps(c[j][n]), totals[j]);
  at.q += group;
  at.offsets += 8;
  ORDO_UNROLL
  for (int j = 0; j < NR; ++j) rows[j] += group / 2;
}

// c[j] = c_g of weight rows[j] for the 8 groups from g (or those left).
template <int NR>
ORDO_AVX2 inline void block_scales(const float* activation_scales, const std::uint16_t* const (&scales)[NR], Index g,
                                   Index groups, float (&c)[NR][8]) {
  if (groups - g >= 8) {
    const __m256 s = _mm256_loadu_ps(activation_scales + g);
    for (int j = 0; j < NR; ++j)
      _mm256_store_ps(c[j], _mm256_mul_ps(s, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales[j] + g)))));
    return;
  }
  for (int j = 0; j < NR; ++j)  // the last n < 8 (only they are read)
    for (Index n = 0; n < groups - g; ++n) c[j][n] = activation_scales[g + n] * _cvtsh_ss(scales[j][g + n]);
}

template <int NR, int kSteps>
ORDO_AVX2 void row_int4_groups(const QuantizedActivations& a, const WeightMatrix& w, Index i, Index r, Index spacing,
                               Index first, float* y) {
  Int4Rows<NR> rows(w, r, spacing);  // its values walk the row
  const Index groups = a.groups(), group = kSteps > 0 ? 64 * kSteps : a.group();
  GroupCursor at{a.pair_q(i), a.nibble_offsets(i)};
  __m256 even[NR], odd[NR];
  for (int j = 0; j < NR; ++j) even[j] = odd[j] = _mm256_setzero_ps();
  alignas(32) float c[NR][8];
  for (Index g = 0; g < groups; g += 2) {
    if (g % 8 == 0) block_scales<NR>(a.scales(i), rows.scales, g, groups, c);
    group_step_one_row<NR, kSteps>(at, rows.values, group, c, g % 8, even);
    if (g + 1 < groups) group_step_one_row<NR, kSteps>(at, rows.values, group, c, g % 8 + 1, odd);
  }
  for (int j = 0; j < NR; ++j) y[r + j * spacing - first] = integer_detail::final_sum(even[j], odd[j]);
}

// One activation row against weight rows [first, first + count) in groups of a multiple
// of 64, kSteps as above: NR rows at a time half the matrix apart, as row_int4_pairs runs.
template <int kSteps>
ORDO_AVX2 void row_int4_groups_all(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count,
                                   float* y) {
  constexpr int NR = 2;
  const Index half = count / NR;
  for (Index r = first; r < first + half; ++r) row_int4_groups<NR, kSteps>(a, w, 0, r, half, first, y);
  for (Index r = first + NR * half; r < first + count; ++r) row_int4_groups<1, kSteps>(a, w, 0, r, 1, first, y);
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
  if (w.format() == WeightFormat::Int4 && a.pairs() && a.rows() == 1) {
    const Index half = count / NR;
    for (Index r = first; r < first + half; ++r) row_int4_pairs<NR>(a, w, 0, r, half, first, y);
    for (Index r = first + NR * half; r < first + count; ++r) row_int4_pairs<1>(a, w, 0, r, 1, first, y);
    return;
  }
  if (w.format() == WeightFormat::Int4 && a.pair_order() && a.group() % 64 == 0 && a.rows() == 1) {
    switch (a.group()) {
      case 64: return row_int4_groups_all<1>(a, w, first, count, y);
      case 128: return row_int4_groups_all<2>(a, w, first, count, y);
      case 256: return row_int4_groups_all<4>(a, w, first, count, y);
      default: return row_int4_groups_all<0>(a, w, first, count, y);
    }
  }
  if (a.rows() == 1) {
    const Index half = count / NR;
    for (Index r = first; r < first + half; ++r) tile_avx2<1, NR>(a, w, 0, r, half, first, y, y_stride);
    for (Index r = first + NR * half; r < first + count; ++r) tile_avx2<1, 1>(a, w, 0, r, 1, first, y, y_stride);
    return;
  }
  const bool sign_split = w.format() == WeightFormat::Int8 && a.sign_split();
  const bool int4_pairs = w.format() == WeightFormat::Int4 && a.pairs();
  constexpr Index kPanel = 64;
  for (Index panel = first; panel < first + count; panel += kPanel) {
    const Index end = std::min(first + count, panel + kPanel);
    integer_detail::stream_in(w, panel, end);
    Index i0 = 0;
    if (int4_pairs) {
      for (; i0 + 4 <= a.rows(); i0 += 4)
        for (Index r = panel; r < end; ++r) tile_int4_pairs<4>(a, w, i0, r, first, y, y_stride);
      for (; i0 + 2 <= a.rows(); i0 += 2)
        for (Index r = panel; r < end; ++r) tile_int4_pairs<2>(a, w, i0, r, first, y, y_stride);
      for (; i0 < a.rows(); ++i0)
        for (Index r = panel; r < end; ++r) tile_int4_pairs<1>(a, w, i0, r, first, y, y_stride);
      continue;
    }
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
#if defined(__x86_64__)
  // Decode steps (a row or a few) stream faster through the AVX2 kernels, but for int4
  // in groups of 32, whose AVX-512 kernels read two groups a step: int8 decoded the bench
  // model at 3.8x f32 against 3.2x (one thread), int4 in groups of 128 and 256 ran at
  // 29.5 and 33-44 GMAC/s against 21.4 and 33 (one and two rows, 768 x 2048; one row now
  // takes row_int4_groups, 51-57). The same numbers either way.
  const bool few_rows = a.rows() < 4 && !(w.format() == WeightFormat::Int4 && w.group() == 32);
  if (path == KernelPath::Amx && amx::takes(a, w)) return amx::integer_product(a, w, first, count, y, y_stride);
  if (path >= KernelPath::Avx512 && avx512::integer_product_takes(a, w) && !few_rows)
    return avx512::integer_product(a, w, first, count, y, y_stride);
  if (path >= KernelPath::Avx2) return product_avx2(a, w, first, count, y, y_stride);
#endif
  for (Index r = first; r < first + count; ++r)
    for (Index i = 0; i < a.rows(); ++i) y[i * y_stride + (r - first)] = product_portable(a, i, w, r);
}

}  // namespace ordo::kernels
