#include "engine/quantized_matvec.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/kernel_path.h"
#include "engine/matvec.h"
#include "engine/quantized_avx512.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ordo::kernels {

namespace {

void store(float* y, float value, float alpha, float beta) { *y = alpha * value + (beta == 0.0f ? 0.0f : beta * *y); }

// Where the kernels that compute all rows' dots first put them before store(): y itself
// when beta does not read it, else a per-thread buffer (grown once to the widest).
float* dots_buffer(const WeightMatrix& w, float* y, float beta) {
  if (beta == 0.0f) return y;
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<std::size_t>(w.rows()));
  return buffer.data();
}

template <class T>
const T* row_of(const WeightMatrix& w, Index r) {
  return reinterpret_cast<const T*>(static_cast<const std::byte*>(w.data()) + static_cast<std::size_t>(r) * w.row_bytes());
}
template <class T>
const T* scales_of(const WeightMatrix& w, Index r) {
  return reinterpret_cast<const T*>(static_cast<const std::byte*>(w.scales()) +
                                    static_cast<std::size_t>(r) * w.row_scale_bytes());
}

// Weight k of an int4 run of 32 (16 bytes): low nibbles hold 0..15, high ones 16..31.
int int4_at(const std::uint8_t* run, Index k) {
  const std::uint8_t byte = run[k % 16];
  return (k < 16 ? byte & 0x0f : byte >> 4) - 8;
}

// ---- Portable: one weight at a time, in float32.

// Row r of w as float32 (the definition every other path must agree with).
void dequantize_row_portable(const WeightMatrix& w, Index r, float* out) {
  const Index cols = w.cols();
  switch (w.format()) {
    case WeightFormat::F32: {
      const float* row = row_of<float>(w, r);
      for (Index k = 0; k < cols; ++k) out[k] = row[k];
      return;
    }
    case WeightFormat::F16: {
      const std::uint16_t* row = row_of<std::uint16_t>(w, r);
      for (Index k = 0; k < cols; ++k) out[k] = half_to_float(row[k]);
      return;
    }
    case WeightFormat::BF16: {
      const std::uint16_t* row = row_of<std::uint16_t>(w, r);
      for (Index k = 0; k < cols; ++k) out[k] = bfloat16_to_float(row[k]);
      return;
    }
    case WeightFormat::Int8: {
      const std::int8_t* row = row_of<std::int8_t>(w, r);
      const float* scales = scales_of<float>(w, r);
      for (Index k = 0; k < cols; ++k) out[k] = static_cast<float>(row[k]) * scales[k / w.group()];
      return;
    }
    case WeightFormat::Int4: {
      const std::uint8_t* row = row_of<std::uint8_t>(w, r);
      const std::uint16_t* scales = scales_of<std::uint16_t>(w, r);
      for (Index k = 0; k < cols; ++k)
        out[k] = static_cast<float>(int4_at(row + k / kInt4Run * 16, k % kInt4Run)) *
                 half_to_float(scales[k / w.group()]);
      return;
    }
  }
}

// Row r as float32 in a per-thread buffer (valid until the thread's next call): for the
// paths that convert first, then sum.
const float* converted_row(const WeightMatrix& w, Index r) {
  thread_local std::vector<float> row;
  row.resize(static_cast<std::size_t>(w.cols()));
  dequantize_row_portable(w, r, row.data());
  return row.data();
}

// The definition every path must agree with bit for bit: the row converted to float32
// (dequantize_row_portable), then the float32 kernel's sum, one product at a time.
float dot_portable(const WeightMatrix& w, Index r, const float* x) {
  const float* row = converted_row(w, r);
  float sum = 0.0f;
  for (Index k = 0; k < w.cols(); ++k) sum += row[k] * x[k];
  return sum;
}

#if defined(__x86_64__)
// ---- AVX2 + FMA + F16C: eight weights at a time, converted in registers.

#define ORDO_AVX2 __attribute__((target("avx2,fma,f16c")))

ORDO_AVX2 float horizontal_sum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}

ORDO_AVX2 inline __m256 load_f16(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
ORDO_AVX2 inline __m256 load_bf16(const std::uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
ORDO_AVX2 inline __m256 load_int8(const std::int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
// The 32 weights of an int4 run, as four vectors of eight in order.
struct Int4Run {
  __m256 w[4];
};
ORDO_AVX2 inline Int4Run load_int4(const std::uint8_t* run) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(run));
  const __m128i mask = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  const __m128i lo = _mm_sub_epi8(_mm_and_si128(bytes, mask), eight);
  const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), eight);
  return {{_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)),
           _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))}};
}

// The eight weights of row r from k on, as float32: exactly what dequantize_row_portable
// writes (a conversion, then one float multiply by the scale for quantized formats).
struct F16Row {
  const std::uint16_t* row;
  ORDO_AVX2 __m256 operator()(Index k) const { return load_f16(row + k); }
  float at(Index k) const { return half_to_float(row[k]); }
};
struct BF16Row {
  const std::uint16_t* row;
  ORDO_AVX2 __m256 operator()(Index k) const { return load_bf16(row + k); }
  float at(Index k) const { return bfloat16_to_float(row[k]); }
};
// Int8 whose groups are whole vectors of eight (or the whole row, one scale). Asked for
// k in increasing order, it steps to the next group's scale at each boundary (a
// division a vector cost more than the rest of the loop).
struct Int8Row {
  const std::int8_t* row;
  const float* scales;
  Index group;
  Index group_end = group;
  const float* scale = scales;
  __m256 scale_vector = _mm256_set1_ps(*scales);
  ORDO_AVX2 __m256 operator()(Index k) {
    if (k >= group_end) {
      while (k >= group_end) {
        group_end += group;
        ++scale;
      }
      scale_vector = _mm256_set1_ps(*scale);
    }
    return _mm256_mul_ps(load_int8(row + k), scale_vector);
  }
  float at(Index k) const { return static_cast<float>(row[k]) * scales[k / group]; }
};

// dot(w row, x) with engine/matvec.cpp's float32 arithmetic exactly: four accumulators
// over runs of 32, then runs of 8 into the first, their sum, then the tail one product
// at a time. So a stored row gives the very number its float32 conversion gives, and a
// sequence's result never depends on the batch it runs in (a few rows convert a block
// and run the float32 kernel: blas.cpp).
template <class Row>
ORDO_AVX2 float dot_like_float(Row w, const float* x, Index cols) {
  const Index wide_end = cols - cols % 32;
  const Index narrow_end = cols - cols % 8;
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  Index k = 0;
  for (; k < wide_end; k += 32) {
    a = _mm256_fmadd_ps(w(k), _mm256_loadu_ps(x + k), a);
    b = _mm256_fmadd_ps(w(k + 8), _mm256_loadu_ps(x + k + 8), b);
    c = _mm256_fmadd_ps(w(k + 16), _mm256_loadu_ps(x + k + 16), c);
    d = _mm256_fmadd_ps(w(k + 24), _mm256_loadu_ps(x + k + 24), d);
  }
  for (; k < narrow_end; k += 8) a = _mm256_fmadd_ps(w(k), _mm256_loadu_ps(x + k), a);
  float sum = horizontal_sum(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
  for (; k < cols; ++k) sum = std::fma(w.at(k), x[k], sum);  // as engine/matvec.cpp's tail
  return sum;
}

// Quantized rows at batch 1 sum each group of q * x first and scale the group's sum
// once: converting a weight then takes three instructions (load-extend, convert, FMA)
// instead of four, which is the difference between reaching the memory bandwidth and
// not. The sums differ from the float32 kernel's on the dequantized weights by float
// rounding only; a few rows (blas.cpp) run the float32 kernels on converted blocks.

// Int8, groups whole runs of 32, or one group (the row, any width).
ORDO_AVX2 float dot_int8(const std::int8_t* row, const float* scales, Index group, const float* x, Index cols) {
  __m256 total = _mm256_setzero_ps();
  float tail = 0.0f;
  for (Index begin = 0, g = 0; begin < cols; begin += group, ++g) {
    const Index end = begin + group;
    __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
    Index k = begin;
    for (; k + 32 <= end; k += 32) {
      a = _mm256_fmadd_ps(load_int8(row + k), _mm256_loadu_ps(x + k), a);
      b = _mm256_fmadd_ps(load_int8(row + k + 8), _mm256_loadu_ps(x + k + 8), b);
      c = _mm256_fmadd_ps(load_int8(row + k + 16), _mm256_loadu_ps(x + k + 16), c);
      d = _mm256_fmadd_ps(load_int8(row + k + 24), _mm256_loadu_ps(x + k + 24), d);
    }
    for (; k + 8 <= end; k += 8) a = _mm256_fmadd_ps(load_int8(row + k), _mm256_loadu_ps(x + k), a);
    float group_tail = 0.0f;
    for (; k < end; ++k) group_tail += static_cast<float>(row[k]) * x[k];
    total = _mm256_fmadd_ps(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)), _mm256_set1_ps(scales[g]), total);
    tail += group_tail * scales[g];
  }
  return horizontal_sum(total) + tail;
}

// Int8 whose rows and groups are whole runs of 32: dot_int8's sums for R rows at once,
// each with its own chains (as dot_int4 below).
template <int R>
ORDO_AVX2 void dot_int8_runs(const std::int8_t* const (&rows)[R], const float* const (&scales)[R], Index group,
                             const float* x, Index cols, float (&out)[R]) {
  __m256 total[R];
  for (int i = 0; i < R; ++i) total[i] = _mm256_setzero_ps();
  for (Index begin = 0, g = 0; begin < cols; begin += group, ++g) {
    __m256 a[R], b[R], c[R], d[R];
    for (int i = 0; i < R; ++i) a[i] = b[i] = c[i] = d[i] = _mm256_setzero_ps();
    for (Index k = begin; k < begin + group; k += 32)
      for (int i = 0; i < R; ++i) {
        a[i] = _mm256_fmadd_ps(load_int8(rows[i] + k), _mm256_loadu_ps(x + k), a[i]);
        b[i] = _mm256_fmadd_ps(load_int8(rows[i] + k + 8), _mm256_loadu_ps(x + k + 8), b[i]);
        c[i] = _mm256_fmadd_ps(load_int8(rows[i] + k + 16), _mm256_loadu_ps(x + k + 16), c[i]);
        d[i] = _mm256_fmadd_ps(load_int8(rows[i] + k + 24), _mm256_loadu_ps(x + k + 24), d[i]);
      }
    for (int i = 0; i < R; ++i) {
      const __m256 sum = _mm256_add_ps(_mm256_add_ps(a[i], b[i]), _mm256_add_ps(c[i], d[i]));
      total[i] = _mm256_fmadd_ps(sum, _mm256_broadcast_ss(scales[i] + g), total[i]);
    }
  }
  // dot_int8 adds its tail, 0 here, which changes nothing: no total is -0.
  for (int i = 0; i < R; ++i) out[i] = horizontal_sum(total[i]);
}

// Int4: whole runs of 32, each unpacked once into four vectors of q; out[i] = dot(rows[i],
// x) for R rows at once, each with its own chains (one row alone waits on its chain of
// totals, an FMA's latency a group). The scales are converted eight at a time into a
// buffer the loop broadcasts from (one conversion and broadcast a group cost three
// instructions of about thirty).
template <int R>
ORDO_AVX2 void dot_int4(const std::uint8_t* const (&rows)[R], const std::uint16_t* const (&scales)[R], Index group,
                        const float* x, Index cols, float (&out)[R]) {
  constexpr Index kScalesAtOnce = 8;
  alignas(32) float converted[R][kScalesAtOnce];
  const Index groups = cols / group;
  __m256 total[R];
  for (int i = 0; i < R; ++i) total[i] = _mm256_setzero_ps();
  for (Index first = 0; first < groups; first += kScalesAtOnce) {
    const Index n = std::min(kScalesAtOnce, groups - first);
    for (int i = 0; i < R; ++i) {
      if (n == kScalesAtOnce)
        _mm256_store_ps(converted[i],
                        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales[i] + first))));
      else
        for (Index j = 0; j < n; ++j) converted[i][j] = _cvtsh_ss(scales[i][first + j]);
    }
    for (Index g = 0; g < n; ++g) {
      const Index begin = (first + g) * group;
      __m256 a[R], b[R], c[R], d[R];
      for (int i = 0; i < R; ++i) a[i] = b[i] = c[i] = d[i] = _mm256_setzero_ps();
      for (Index k = begin; k < begin + group; k += kInt4Run) {
        for (int i = 0; i < R; ++i) {
          const Int4Run run = load_int4(rows[i] + static_cast<std::size_t>(k) / 2);
          a[i] = _mm256_fmadd_ps(run.w[0], _mm256_loadu_ps(x + k), a[i]);
          b[i] = _mm256_fmadd_ps(run.w[1], _mm256_loadu_ps(x + k + 8), b[i]);
          c[i] = _mm256_fmadd_ps(run.w[2], _mm256_loadu_ps(x + k + 16), c[i]);
          d[i] = _mm256_fmadd_ps(run.w[3], _mm256_loadu_ps(x + k + 24), d[i]);
        }
      }
      for (int i = 0; i < R; ++i) {
        const __m256 sum = _mm256_add_ps(_mm256_add_ps(a[i], b[i]), _mm256_add_ps(c[i], d[i]));
        total[i] = _mm256_fmadd_ps(sum, _mm256_broadcast_ss(converted[i] + g), total[i]);
      }
    }
  }
  for (int i = 0; i < R; ++i) out[i] = horizontal_sum(total[i]);
}

// Whether dots_in_pairs takes w: int4, or int8 whose rows and groups are whole runs of 32.
bool pairs_take(const WeightMatrix& w) {
  return w.format() == WeightFormat::Int4 ||
         (w.format() == WeightFormat::Int8 && w.cols() > 0 && w.cols() % 32 == 0 && w.group() % 32 == 0);
}

// Rows in pairs half the matrix apart, i and i + rows / 2, so that each half is one
// sequential stream for the hardware prefetcher (as engine/quantized_avx512.cpp does):
// two chains of totals hide each other's latency. For a w that pairs_take() accepts.
template <int R>
ORDO_AVX2 void dot_rows(const WeightMatrix& w, const Index (&r)[R], const float* x, float (&out)[R]) {
  if (w.format() == WeightFormat::Int4) {
    const std::uint8_t* rows[R];
    const std::uint16_t* scales[R];
    for (int i = 0; i < R; ++i) {
      rows[i] = row_of<std::uint8_t>(w, r[i]);
      scales[i] = scales_of<std::uint16_t>(w, r[i]);
    }
    return dot_int4<R>(rows, scales, w.group(), x, w.cols(), out);
  }
  const std::int8_t* rows[R];
  const float* scales[R];
  for (int i = 0; i < R; ++i) {
    rows[i] = row_of<std::int8_t>(w, r[i]);
    scales[i] = scales_of<float>(w, r[i]);
  }
  dot_int8_runs<R>(rows, scales, w.group(), x, w.cols(), out);
}

ORDO_AVX2 void dots_in_pairs(const WeightMatrix& w, const float* x, float* out) {
  const Index half = w.rows() / 2;
  for (Index r = 0; r < half; ++r) {
    float dots[2];
    dot_rows<2>(w, {r, r + half}, x, dots);
    out[r] = dots[0];
    out[r + half] = dots[1];
  }
  if (w.rows() % 2 != 0) {
    float dot[1];
    dot_rows<1>(w, {w.rows() - 1}, x, dot);
    out[w.rows() - 1] = dot[0];
  }
}

ORDO_AVX2 float dot_avx2(const WeightMatrix& w, Index r, const float* x) {
  const Index cols = w.cols();
  switch (w.format()) {
    case WeightFormat::F16: return dot_like_float(F16Row{row_of<std::uint16_t>(w, r)}, x, cols);
    case WeightFormat::BF16: return dot_like_float(BF16Row{row_of<std::uint16_t>(w, r)}, x, cols);
    case WeightFormat::Int8:
      if (w.group() % 32 == 0 || w.group() == cols)
        return dot_int8(row_of<std::int8_t>(w, r), scales_of<float>(w, r), w.group(), x, cols);
      break;  // groups that split runs of 32: converted first, below
    case WeightFormat::Int4: {
      float dot[1];
      dot_int4<1>({row_of<std::uint8_t>(w, r)}, {scales_of<std::uint16_t>(w, r)}, w.group(), x, cols, dot);
      return dot[0];
    }
    case WeightFormat::F32: break;
  }
  float sum;
  matvec(converted_row(w, r), 1, cols, cols, x, &sum, 1.0f, 0.0f);
  return sum;
}

ORDO_AVX2 void dequantize_row_avx2(const WeightMatrix& w, Index r, float* out) {
  const Index cols = w.cols();
  Index k = 0;
  switch (w.format()) {
    case WeightFormat::F16: {
      const std::uint16_t* row = row_of<std::uint16_t>(w, r);
      for (; k + 8 <= cols; k += 8) _mm256_storeu_ps(out + k, load_f16(row + k));
      break;
    }
    case WeightFormat::BF16: {
      const std::uint16_t* row = row_of<std::uint16_t>(w, r);
      for (; k + 8 <= cols; k += 8) _mm256_storeu_ps(out + k, load_bf16(row + k));
      break;
    }
    case WeightFormat::Int8: {
      const std::int8_t* row = row_of<std::int8_t>(w, r);
      const float* scales = scales_of<float>(w, r);
      if (w.group() % 8 != 0 && w.group() != cols) break;  // a group that splits a vector: the portable loop
      Int8Row converted{row, scales, w.group()};
      for (; k + 8 <= cols; k += 8) _mm256_storeu_ps(out + k, converted(k));
      break;
    }
    case WeightFormat::Int4: {
      const std::uint8_t* row = row_of<std::uint8_t>(w, r);
      const std::uint16_t* scales = scales_of<std::uint16_t>(w, r);
      __m256 scale = _mm256_setzero_ps();
      for (Index group_end = 0; k < cols; k += kInt4Run) {
        if (k == group_end) {
          scale = _mm256_set1_ps(_cvtsh_ss(scales[k / w.group()]));
          group_end += w.group();
        }
        const Int4Run run = load_int4(row + k / 2);
        for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + k + 8 * i, _mm256_mul_ps(run.w[i], scale));
      }
      break;
    }
    case WeightFormat::F32: break;
  }
  if (k < cols) {  // the tail, from the definition
    const float* row = converted_row(w, r);
    for (; k < cols; ++k) out[k] = row[k];
  }
}

#endif

}  // namespace

void matvec(const WeightMatrix& w, const float* x, float* y, float alpha, float beta) {
  matvec_on(kernel_path(), w, x, y, alpha, beta);
}

void matvec_on(KernelPath path, const WeightMatrix& w, const float* x, float* y, float alpha, float beta) {
  if (path > widest_kernel_path())
    throw Error("kernels::matvec_on", "the " + std::string(kernel_path_name(path)) + " path on a CPU whose widest is " +
                                          std::string(kernel_path_name(widest_kernel_path())),
                "ask for a path at most kernels::widest_kernel_path()");
  if (w.is_float32()) return matvec(w.float32().data(), w.rows(), w.cols(), w.cols(), x, y, alpha, beta);
#if defined(__x86_64__)
  if (path == KernelPath::Avx512 && avx512::takes(w)) {
    // The same sums as dot_avx2 (engine/quantized_avx512.h).
    float* dots = dots_buffer(w, y, beta);
    avx512::dot_rows(w, x, dots);
    for (Index r = 0; r < w.rows(); ++r) store(y + r, dots[r], alpha, beta);
    return;
  }
  if (path >= KernelPath::Avx2 && pairs_take(w)) {
    float* dots = dots_buffer(w, y, beta);
    dots_in_pairs(w, x, dots);
    for (Index r = 0; r < w.rows(); ++r) store(y + r, dots[r], alpha, beta);
    return;
  }
  if (path >= KernelPath::Avx2) {
    for (Index r = 0; r < w.rows(); ++r) store(y + r, dot_avx2(w, r, x), alpha, beta);
    return;
  }
#endif
  for (Index r = 0; r < w.rows(); ++r) store(y + r, dot_portable(w, r, x), alpha, beta);
}

void dequantize(const WeightMatrix& w, Index first, Index count, float* out, Index out_stride) {
  for (Index i = 0; i < count; ++i) {
    float* row = out + i * out_stride;
#if defined(__x86_64__)
    if (has_avx2() && !w.is_float32()) {
      dequantize_row_avx2(w, first + i, row);
      continue;
    }
#endif
    dequantize_row_portable(w, first + i, row);
  }
}

}  // namespace ordo::kernels
