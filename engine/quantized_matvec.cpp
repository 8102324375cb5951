#include "engine/quantized_matvec.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/integer_product.h"
#include "engine/kernel_path.h"
#include "engine/matvec.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ordo::kernels {

namespace {

// Where the kernels that compute all rows' dots first put them before store_scaled(): y itself
// when beta does not read it, else a per-thread buffer (grown once to the widest).
float* dots_buffer(const WeightMatrix& w, float* y, float beta) {
  if (beta == 0.0f) return y;
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<std::size_t>(w.rows()));
  return buffer.data();
}

// ---- Portable: one weight at a time, in float32.

// Row r of w as float32 (the definition every other path must agree with).
void dequantize_row_portable(const WeightMatrix& w, Index r, float* out) {
  const Index cols = w.cols();
  switch (w.format()) {
    case WeightFormat::F32: {
      const float* row = w.row<float>(r);
      for (Index k = 0; k < cols; ++k) out[k] = row[k];
      return;
    }
    case WeightFormat::F16: {
      const std::uint16_t* row = w.row<std::uint16_t>(r);
      for (Index k = 0; k < cols; ++k) out[k] = half_to_float(row[k]);
      return;
    }
    case WeightFormat::BF16: {
      const std::uint16_t* row = w.row<std::uint16_t>(r);
      for (Index k = 0; k < cols; ++k) out[k] = bfloat16_to_float(row[k]);
      return;
    }
    case WeightFormat::Int8: {
      const std::int8_t* row = w.row<std::int8_t>(r);
      const float* scales = w.row_scales<float>(r);
      for (Index k = 0; k < cols; ++k) out[k] = static_cast<float>(row[k]) * scales[k / w.group()];
      return;
    }
    case WeightFormat::Int4: {
      if (!w.int4_in_panels()) {  // the file's layout: runs of 32, weight j low and j + 16 high
        const std::uint8_t* row = w.row<std::uint8_t>(r);
        const std::uint16_t* scales = w.row_scales<std::uint16_t>(r);
        for (Index k = 0; k < cols; ++k) {
          const std::uint8_t byte = row[k / kInt4Run * 16 + k % 16];
          const int n = k % kInt4Run < 16 ? byte & 0x0f : byte >> 4;
          out[k] = static_cast<float>(n - 8) * half_to_float(scales[k / w.group()]);
        }
        return;
      }
      const Int4PanelLayout panels = w.int4_panels();  // engine/int4_panels.h
      for (Index g = 0; g < panels.groups(); ++g) {
        const float scale = half_to_float(panels.scale(r, g));
        for (Index k = g * panels.group; k < (g + 1) * panels.group; ++k)
          out[k] = static_cast<float>(panels.nibble(r, k) - 8) * scale;
      }
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

// The definition every path must agree with bit for bit, for half-precision rows (as
// dot_half_avx2): the row converted to float32 (dequantize_row_portable), then the
// float32 kernel's sum, one product at a time.
float dot_half_portable(const WeightMatrix& w, Index r, const float* x) {
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

// How far ahead of a half-precision row's step of 32 weights (one 64-byte cache line)
// dot_like_float asks for the line it will read. Unlike float32's rows (engine/matvec.cpp,
// which the hardware prefetcher keeps up with alone), these converted in registers did
// not stream at memory's rate: 32000 rows of 768 ran 8.5-10.2 G weights/s without it,
// 11.3-13.5 at 2 KB ahead (one thread, Intel Xeon; 1, 2 and 4 KB measured alike).
constexpr Index kHalfPrefetchBytes = 2048;

// dot(w row, x) with engine/matvec.cpp's float32 arithmetic exactly: four accumulators
// over runs of 32, then runs of 8 into the first, their sum, then the tail one product
// at a time. So a stored row gives the very number its float32 conversion gives, and a
// sequence's result never depends on the batch it runs in (a few rows convert a block
// and run the float32 kernel: blas.cpp). Row is F16Row or BF16Row.
template <class Row>
ORDO_AVX2 float dot_like_float(Row w, const float* x, Index cols) {
  const Index wide_end = cols - cols % 32;
  const Index narrow_end = cols - cols % 8;
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  Index k = 0;
  for (; k < wide_end; k += 32) {
    // Past the row's end it reads into the next rows, as the loop will; a prefetch never
    // faults, so past the matrix's end it is harmless (the address is made as an integer:
    // a pointer past the end would be undefined).
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(w.row + k) + kHalfPrefetchBytes),
                 _MM_HINT_T0);
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

// Half-precision rows only: matvec_on sends float32 to engine/matvec.h and int8 and int4
// to engine/integer_product.h before it gets here.
ORDO_AVX2 float dot_half_avx2(const WeightMatrix& w, Index r, const float* x) {
  if (w.format() == WeightFormat::BF16) return dot_like_float(BF16Row{w.row<std::uint16_t>(r)}, x, w.cols());
  assert(w.format() == WeightFormat::F16);
  return dot_like_float(F16Row{w.row<std::uint16_t>(r)}, x, w.cols());
}

ORDO_AVX2 void dequantize_row_avx2(const WeightMatrix& w, Index r, float* out) {
  const Index cols = w.cols();
  Index k = 0;
  switch (w.format()) {
    case WeightFormat::F16: {
      const std::uint16_t* row = w.row<std::uint16_t>(r);
      for (; k + 8 <= cols; k += 8) _mm256_storeu_ps(out + k, load_f16(row + k));
      break;
    }
    case WeightFormat::BF16: {
      const std::uint16_t* row = w.row<std::uint16_t>(r);
      for (; k + 8 <= cols; k += 8) _mm256_storeu_ps(out + k, load_bf16(row + k));
      break;
    }
    case WeightFormat::Int8: {
      const std::int8_t* row = w.row<std::int8_t>(r);
      const float* scales = w.row_scales<float>(r);
      if (w.group() % 8 != 0 && w.group() != cols) break;  // a group that splits a vector: the portable loop
      Int8Row converted{row, scales, w.group()};
      for (; k + 8 <= cols; k += 8) _mm256_storeu_ps(out + k, converted(k));
      break;
    }
    case WeightFormat::Int4:  // the portable loop: int4 rows convert one at a time (a lookup, a re-encoding)
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
  if (integer_product_takes(w)) {  // int8 and int4: one definition at every batch size
    thread_local QuantizedActivations activations;
    activations.quantize_on(path, ConstMatrixRef(x, 1, w.cols()), w.group());
    float* dots = dots_buffer(w, y, beta);
    integer_product_on(path, activations, w, 0, w.rows(), dots, w.rows());
    for (Index r = 0; r < w.rows(); ++r) store_scaled(y + r, dots[r], alpha, beta);
    return;
  }
#if defined(__x86_64__)
  if (path >= KernelPath::Avx2) {
    for (Index r = 0; r < w.rows(); ++r) store_scaled(y + r, dot_half_avx2(w, r, x), alpha, beta);
    return;
  }
#endif
  for (Index r = 0; r < w.rows(); ++r) store_scaled(y + r, dot_half_portable(w, r, x), alpha, beta);
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
