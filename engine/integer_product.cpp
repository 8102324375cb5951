#include "engine/integer_product.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <string>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/integer_product_avx512.h"
#include "engine/integer_product_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ordo::kernels {

namespace integer_detail {

void weight_scales(const WeightMatrix& w, Index r, float* out) {
  const void* scales = static_cast<const std::byte*>(w.scales()) + static_cast<std::size_t>(r) * w.row_scale_bytes();
  const Index groups = w.groups_per_row();
  if (w.format() == WeightFormat::Int8) {
    std::copy_n(static_cast<const float*>(scales), groups, out);
  } else {
    const auto* half = static_cast<const std::uint16_t*>(scales);
    for (Index g = 0; g < groups; ++g) out[g] = half_to_float(half[g]);
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float combine_avx2(const std::int32_t* dots, const float* scales,
                                                       const float* weight_scales, Index groups) {
  __m256 t = _mm256_setzero_ps();
  Index g = 0;
  for (; g + 8 <= groups; g += 8) {
    const __m256 c = _mm256_mul_ps(_mm256_loadu_ps(scales + g), _mm256_loadu_ps(weight_scales + g));
    const __m256 dot = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dots + g)));
    t = _mm256_fmadd_ps(dot, c, t);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, t);
  for (; g < groups; ++g)
    lanes[g % 8] = std::fma(static_cast<float>(dots[g]), scales[g] * weight_scales[g], lanes[g % 8]);
  return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}
#endif

}  // namespace integer_detail

namespace {

using integer_detail::weight_scales;

// Groups whose largest |x| is below this quantize to zero: 127 / amax must stay finite.
constexpr float kTinyGroup = 0x1p-120f;

// v rounded to the nearest integer, halves to even, for |v| < 2^22: adding 1.5 * 2^23
// leaves no fraction bits, so the float addition rounds, as the hardware's conversion
// (cvtps2dq) does in its default mode. Exact, portable and vectorizable.
inline float round_to_even(float v) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
  return (v + kShift) - kShift;
}

Index padded(Index cols) { return (cols + 63) / 64 * 64; }

}  // namespace

void QuantizedActivations::quantize(ConstMatrixRef x, Index group) {
  rows_ = x.rows();
  cols_ = x.cols();
  group_ = group;
  groups_ = group == 0 ? 0 : cols_ / group;
  stride_ = padded(cols_);
  const auto cells = static_cast<std::size_t>(rows_ * stride_);
  if (q_.size() < cells) {
    q_.resize(cells);
    q_unsigned_.resize(cells);
  }
  const auto group_cells = static_cast<std::size_t>(rows_ * groups_);
  if (scales_.size() < group_cells) {
    scales_.resize(group_cells);
    sums_.resize(group_cells);
  }
  for (Index i = 0; i < rows_; ++i) {
    const float* row = x.data() + i * x.stride();
    std::int8_t* q = q_.data() + i * stride_;
    for (Index g = 0; g < groups_; ++g) {
      const Index begin = g * group, end = begin + group;
      float amax = 0.0f;
      bool finite = true;
      for (Index k = begin; k < end; ++k) {
        const float magnitude = std::fabs(row[k]);
        finite = finite && magnitude <= std::numeric_limits<float>::max();
        amax = std::max(amax, magnitude);
      }
      float& scale = scales_[static_cast<std::size_t>(i * groups_ + g)];
      std::int32_t sum = 0;
      if (!finite || amax < kTinyGroup) {
        scale = finite ? 0.0f : std::numeric_limits<float>::quiet_NaN();
        std::fill(q + begin, q + end, std::int8_t{0});
      } else {
        scale = amax / 127.0f;
        const float inverse = 127.0f / amax;
        for (Index k = begin; k < end; ++k) {
          // |row[k] * inverse| <= 127 (1 + 2^-23): it rounds into [-127, 127].
          const auto value = static_cast<std::int32_t>(round_to_even(row[k] * inverse));
          q[k] = static_cast<std::int8_t>(value);
          sum += value;
        }
      }
      sums_[static_cast<std::size_t>(i * groups_ + g)] = sum;
    }
    std::fill(q + cols_, q + stride_, std::int8_t{0});
    std::uint8_t* u = q_unsigned_.data() + i * stride_;
    for (Index k = 0; k < stride_; ++k) u[k] = static_cast<std::uint8_t>(q[k] + 128);
  }
}

namespace {

template <class T>
const T* row_of(const WeightMatrix& w, Index r) {
  return reinterpret_cast<const T*>(static_cast<const std::byte*>(w.data()) + static_cast<std::size_t>(r) * w.row_bytes());
}

// The definition's float steps: c_g = s_g * w_scale_g, eight running totals by g % 8,
// their sum in one fixed tree. Every path ends here.
float combine(const std::int32_t* dots, const float* scales, const float* weight_scales, Index groups) {
  float t[8] = {};
  for (Index g = 0; g < groups; ++g)
    t[g % 8] = std::fma(static_cast<float>(dots[g]), scales[g] * weight_scales[g], t[g % 8]);
  return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

// Weight k of row r as an integer: the int8 value, or an int4 nibble minus 8. Runs of 32
// int4 weights are 16 bytes: low nibbles hold weights 0..15, high ones 16..31.
int weight_at(const WeightMatrix& w, const void* row, Index k) {
  if (w.format() == WeightFormat::Int8) return static_cast<const std::int8_t*>(row)[k];
  const std::uint8_t byte = static_cast<const std::uint8_t*>(row)[k / kInt4Run * 16 + k % 16];
  return (k % kInt4Run < 16 ? byte & 0x0f : byte >> 4) - 8;
}

// Per-thread buffers of a product: dots and weight scales of a tile.
struct TileBuffers {
  std::vector<std::int32_t> dots;
  std::vector<float> weight_scales;
  void reserve(std::size_t dot_count, std::size_t scale_count) {
    if (dots.size() < dot_count) dots.resize(dot_count);
    if (weight_scales.size() < scale_count) weight_scales.resize(scale_count);
  }
};
TileBuffers& tile_buffers() {
  thread_local TileBuffers buffers;
  return buffers;
}

// ---- Portable: the definition, one product at a time.
void product_portable(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                      Index y_stride) {
  const Index groups = w.groups_per_row(), group = w.group();
  TileBuffers& buffers = tile_buffers();
  buffers.reserve(static_cast<std::size_t>(groups), static_cast<std::size_t>(groups));
  for (Index r = first; r < first + count; ++r) {
    const void* row = row_of<std::byte>(w, r);
    weight_scales(w, r, buffers.weight_scales.data());
    for (Index i = 0; i < a.rows(); ++i) {
      const std::int8_t* q = a.q(i);
      for (Index g = 0; g < groups; ++g) {
        std::int32_t dot = 0;
        for (Index k = g * group; k < (g + 1) * group; ++k) dot += q[k] * weight_at(w, row, k);
        buffers.dots[static_cast<std::size_t>(g)] = dot;
      }
      y[i * y_stride + (r - first)] = combine(buffers.dots.data(), a.scales(i), buffers.weight_scales.data(), groups);
    }
  }
}

#if defined(__x86_64__)
// ---- AVX2: 32 weights an instruction (vpmaddubsw: unsigned bytes times signed bytes,
// adjacent pairs summed to 16 bits; vpmaddwd then sums pairs of those to 32 bits).

#define ORDO_AVX2 __attribute__((target("avx2,fma,f16c")))

ORDO_AVX2 inline std::int32_t horizontal_sum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// 32 int8 weights times 32 int8 activations, as eight 32-bit sums. The unsigned operand
// is |w| (at most 128) and the signed one q with w's sign (at most 127): a pair sums to
// at most 2 * 128 * 127 < 2^15, so vpmaddubsw never saturates.
ORDO_AVX2 inline __m256i dot32_int8(__m256i w, __m256i w_magnitude, __m256i q) {
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

// n (0..15) times q: pairs sum to at most 2 * 15 * 127, no saturation.
ORDO_AVX2 inline __m256i dot32_nibbles(__m256i n, __m256i q) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(n, q), _mm256_set1_epi16(1));
}

// The dots of MR activation rows (from i0) and NR weight rows, every group: into
// dots[(i * NR + j) * groups + g].
template <int MR, int NR>
ORDO_AVX2 void tile_int8(const QuantizedActivations& a, Index i0, const std::int8_t* const (&rows)[NR], Index cols,
                         Index group, std::int32_t* dots) {
  const Index groups = cols / group;
  for (Index g = 0; g < groups; ++g) {
    const Index begin = g * group, end = begin + group;
    __m256i acc[MR][NR];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_si256();
    Index k = begin;
    for (; k + 32 <= end; k += 32) {
      __m256i w[NR], magnitude[NR];
      for (int j = 0; j < NR; ++j) {
        w[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[j] + k));
        magnitude[j] = _mm256_abs_epi8(w[j]);
      }
      for (int i = 0; i < MR; ++i) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q(i0 + i) + k));
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_add_epi32(acc[i][j], dot32_int8(w[j], magnitude[j], q));
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) {
        std::int32_t dot = horizontal_sum(acc[i][j]);
        const std::int8_t* q = a.q(i0 + i);
        for (Index t = k; t < end; ++t) dot += q[t] * rows[j][t];  // a row's last, partial run
        dots[(i * NR + j) * groups + g] = dot;
      }
  }
}

template <int MR, int NR>
ORDO_AVX2 void tile_int4(const QuantizedActivations& a, Index i0, const std::uint8_t* const (&rows)[NR], Index cols,
                         Index group, std::int32_t* dots) {
  const Index groups = cols / group;
  for (Index g = 0; g < groups; ++g) {
    const Index begin = g * group, end = begin + group;
    __m256i acc[MR][NR];
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_si256();
    for (Index k = begin; k < end; k += kInt4Run) {
      __m256i n[NR];
      for (int j = 0; j < NR; ++j) n[j] = unpack_int4(rows[j] + k / 2);
      for (int i = 0; i < MR; ++i) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q(i0 + i) + k));
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_add_epi32(acc[i][j], dot32_nibbles(n[j], q));
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j)
        dots[(i * NR + j) * groups + g] = horizontal_sum(acc[i][j]) - 8 * a.sums(i0 + i)[g];
  }
}

// MR activation rows (from i0) times NR weight rows (from r) into y.
template <int MR, int NR>
ORDO_AVX2 void tile_avx2(const QuantizedActivations& a, const WeightMatrix& w, Index i0, Index r, Index first, float* y,
                         Index y_stride, TileBuffers& buffers) {
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
    const float* weight_scales = buffers.weight_scales.data() + (r + j - first) % 64 * groups;
    for (int i = 0; i < MR; ++i)
      y[(i0 + i) * y_stride + (r + j - first)] =
          integer_detail::combine_avx2(dots + (i * NR + j) * groups, a.scales(i0 + i), weight_scales, groups);
  }
}

// Activation rows in tiles of up to MR, weight rows in pairs: each panel of weight rows
// (a few hundred KB, in the L2 cache) meets every tile of activations (in L1).
template <int MR>
ORDO_AVX2 void rows_avx2(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                         Index y_stride, TileBuffers& buffers) {
  constexpr Index kPanel = 64;  // weight rows a panel, at most (and weight_scales' ring)
  const Index groups = w.groups_per_row();
  for (Index panel = first; panel < first + count; panel += kPanel) {
    const Index panel_end = std::min(first + count, panel + kPanel);
    for (Index r = panel; r < panel_end; ++r)
      weight_scales(w, r, buffers.weight_scales.data() + (r - first) % kPanel * groups);
    Index i0 = 0;
    for (; i0 + MR <= a.rows(); i0 += MR) {
      Index r = panel;
      for (; r + 2 <= panel_end; r += 2) tile_avx2<MR, 2>(a, w, i0, r, first, y, y_stride, buffers);
      if (r < panel_end) tile_avx2<MR, 1>(a, w, i0, r, first, y, y_stride, buffers);
    }
    for (; i0 < a.rows(); ++i0) {
      Index r = panel;
      for (; r + 2 <= panel_end; r += 2) tile_avx2<1, 2>(a, w, i0, r, first, y, y_stride, buffers);
      if (r < panel_end) tile_avx2<1, 1>(a, w, i0, r, first, y, y_stride, buffers);
    }
  }
}

ORDO_AVX2 void product_avx2(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                            Index y_stride) {
  TileBuffers& buffers = tile_buffers();
  const auto groups = static_cast<std::size_t>(w.groups_per_row());
  buffers.reserve(4 * 2 * groups, 64 * groups);
  rows_avx2<4>(a, w, first, count, y, y_stride, buffers);
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
  if (path == KernelPath::Avx512 && avx512::integer_product_takes(w))
    return avx512::integer_product(a, w, first, count, y, y_stride);
  if (path >= KernelPath::Avx2) return product_avx2(a, w, first, count, y, y_stride);
#endif
  product_portable(a, w, first, count, y, y_stride);
}

}  // namespace ordo::kernels
