#include "engine/int4_product.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/int4_panels.h"
#include "engine/integer_product_avx512.h"

#if defined(__x86_64__)
#if !defined(__clang__)
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define ORDO_AVX2 __attribute__((target("avx2,fma,f16c")))
#define ORDO_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
// Unrolls a tile's loops over its rows and panels, so that accumulators stay in registers.
#define ORDO_UNROLL _Pragma("GCC unroll 8")
#endif

namespace ordo::kernels {

namespace {

// The panels [begin, end) that hold weight rows [first, first + count).
struct PanelRange {
  Index begin, end;
  PanelRange(Index first, Index count)
      : begin(first / kInt4PanelRows), end((first + count + kInt4PanelRows - 1) / kInt4PanelRows) {}
};

// Where a tile's results go: row i of the activations, panel p's 16 results in `values`,
// of which those of rows [first, first + count) are wanted.
struct Output {
  float* y;
  Index y_stride, first, count;
  float* at(Index i, Index r) const { return y + i * y_stride + (r - first); }
  bool whole(Index p) const { return p * kInt4PanelRows >= first && (p + 1) * kInt4PanelRows <= first + count; }
  void store_part(Index i, Index p, const float* values) const {
    for (Index o = 0; o < kInt4PanelRows; ++o) {
      const Index r = p * kInt4PanelRows + o;
      if (r >= first && r < first + count) *at(i, r) = values[o];
    }
  }
};

std::int32_t four_bytes(const std::int8_t* q) {
  std::int32_t v;
  std::memcpy(&v, q, sizeof v);
  return v;
}

// ---- Portable: the definition, one row and one group at a time.
void panel_portable(const QuantizedActivations& a, Index i, const Int4PanelLayout& w, Index p, float (&out)[16]) {
  const std::int8_t* q = a.q(i);
  for (Index o = 0; o < kInt4PanelRows; ++o) {
    const Index r = p * kInt4PanelRows + o;
    float t = 0.0f;
    for (Index g = 0; g < w.groups(); ++g) {
      std::int32_t sum = 0;
      for (Index k = g * w.group; k < (g + 1) * w.group; ++k) sum += q[k] * (w.nibble(r, k) - 8);
      const float c = a.scales(i)[g] * half_to_float(w.scales(p, g)[o]);
      t = std::fma(static_cast<float>(sum), c, t);
    }
    out[o] = t;
  }
}

void product_portable(const QuantizedActivations& a, const Int4PanelLayout& w, PanelRange panels, const Output& out) {
  float values[16];
  for (Index p = panels.begin; p < panels.end; ++p)
    for (Index i = 0; i < a.rows(); ++i) {
      panel_portable(a, i, w, p, values);
      out.store_part(i, p, values);
    }
}

#if defined(__x86_64__)
// ---- AVX2: a unit is half a panel, 8 weight rows (a block's first or last 32 bytes).
// vpmaddubsw multiplies a row's nibbles (unsigned) by four activations (signed) and adds
// adjacent pairs to 16 bits: at most 2 x 15 x 127 = 3810 in magnitude, so the 8 steps of
// 32 weights add up in 16 bits (30480) before vpmaddwd widens them to a row's lane.
template <int MR, int NU, bool kOneChunk>
ORDO_AVX2 void tile_avx2(const QuantizedActivations& a, Index i0, const Int4PanelLayout& w, Index u0,
                         float (&out)[MR][NU * 8]) {
  const __m256i low = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  const std::uint8_t* blocks[NU];
  ORDO_UNROLL
  for (int j = 0; j < NU; ++j) blocks[j] = w.blocks((u0 + j) / 2) + 32 * ((u0 + j) % 2);
  __m256 t[MR][NU];
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i)
    ORDO_UNROLL
    for (int j = 0; j < NU; ++j) t[i][j] = _mm256_setzero_ps();
  const Index group = w.group;
  for (Index g = 0; g < w.groups(); ++g) {
    __m256i p[MR][NU];
    ORDO_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m256i offset = _mm256_set1_epi32(-8 * a.sums(i0 + i)[g]);
      ORDO_UNROLL
      for (int j = 0; j < NU; ++j) p[i][j] = offset;
    }
    for (Index chunk = g * group; chunk < (g + 1) * group; chunk += 32) {
      __m256i pairs[MR][NU];
      ORDO_UNROLL
      for (int i = 0; i < MR; ++i)
        ORDO_UNROLL
        for (int j = 0; j < NU; ++j) pairs[i][j] = _mm256_setzero_si256();
      ORDO_UNROLL
      for (Index b = chunk / 8; b < chunk / 8 + 4; ++b) {
        __m256i lo[NU], hi[NU];
        ORDO_UNROLL
        for (int j = 0; j < NU; ++j) {
          const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[j] + 64 * b));
          lo[j] = _mm256_and_si256(bytes, low);
          hi[j] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low);
        }
        ORDO_UNROLL
        for (int i = 0; i < MR; ++i) {
          const std::int8_t* q = a.q(i0 + i) + 8 * b;
          const __m256i q_lo = _mm256_set1_epi32(four_bytes(q)), q_hi = _mm256_set1_epi32(four_bytes(q + 4));
          ORDO_UNROLL
          for (int j = 0; j < NU; ++j) {
            pairs[i][j] = _mm256_add_epi16(pairs[i][j], _mm256_maddubs_epi16(lo[j], q_lo));
            pairs[i][j] = _mm256_add_epi16(pairs[i][j], _mm256_maddubs_epi16(hi[j], q_hi));
          }
        }
      }
      ORDO_UNROLL
      for (int i = 0; i < MR; ++i)
        ORDO_UNROLL
        for (int j = 0; j < NU; ++j) p[i][j] = _mm256_add_epi32(p[i][j], _mm256_madd_epi16(pairs[i][j], ones));
      if constexpr (kOneChunk) break;
    }
    ORDO_UNROLL
    for (int j = 0; j < NU; ++j) {
      const __m256 scales = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scales((u0 + j) / 2, g) + 8 * ((u0 + j) % 2))));
      ORDO_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m256 c = _mm256_mul_ps(_mm256_set1_ps(a.scales(i0 + i)[g]), scales);
        t[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[i][j]), c, t[i][j]);
      }
    }
  }
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i)
    ORDO_UNROLL
    for (int j = 0; j < NU; ++j) _mm256_storeu_ps(out[i] + 8 * j, t[i][j]);
}

// Rows [i0, i0 + MR) against units [u, u + NU) of whole panels or halves.
template <int MR, int NU>
ORDO_AVX2 void run_avx2(const QuantizedActivations& a, Index i0, const Int4PanelLayout& w, Index u, const Output& out) {
  float values[MR][NU * 8];
  if (w.group == 32)
    tile_avx2<MR, NU, true>(a, i0, w, u, values);
  else
    tile_avx2<MR, NU, false>(a, i0, w, u, values);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NU; ++j) {
      const Index unit = u + j, p = unit / 2, r0 = p * kInt4PanelRows + 8 * (unit % 2);
      if (out.whole(p)) {
        std::copy_n(values[i] + 8 * j, 8, out.at(i0 + i, r0));
        continue;
      }
      for (Index o = 0; o < 8; ++o)
        if (r0 + o >= out.first && r0 + o < out.first + out.count) *out.at(i0 + i, r0 + o) = values[i][8 * j + o];
    }
}

// One row of activations: a panel at a time (both halves); more: 4 rows a tile, each
// half panel's weights unpacked once for the 4, the panel in cache for every tile.
ORDO_AVX2 void product_avx2(const QuantizedActivations& a, const Int4PanelLayout& w, PanelRange panels,
                            const Output& out) {
  for (Index p = panels.begin; p < panels.end; ++p) {
    Index i = 0;
    if (a.rows() >= 4) {
      for (; i + 4 <= a.rows(); i += 4) {
        run_avx2<4, 1>(a, i, w, 2 * p, out);
        run_avx2<4, 1>(a, i, w, 2 * p + 1, out);
      }
    }
    for (; i < a.rows(); ++i) run_avx2<1, 2>(a, i, w, 2 * p, out);
  }
}

// A decode step (one activation row) reads each block once, from memory: on AVX-512 the
// hardware prefetcher alone kept one thread at 31 GB/s of panels, and asking for the
// cache line 2 KB ahead as well at 37-39 (32768 x 2048 weights, medians of 40; 512 B and
// 4 KB ahead gained less; on AVX2, whose one-row kernel streams one panel at a time, it
// changed nothing). Batches find their panel in cache, and ask nothing.
ORDO_VNNI inline void prefetch_ahead(const std::uint8_t* block) {
  _mm_prefetch(reinterpret_cast<const char*>(block) + 2048, _MM_HINT_T0);
}

// ---- AVX-512 VNNI: a zmm is a block, 16 rows' four bytes; vpdpbusd multiplies them
// (unsigned nibbles) by four activations (signed) and adds the four into each row's lane,
// starting from minus 8 x the activations' group sum.
template <int MR, int NP>
ORDO_VNNI void tile_vnni(const QuantizedActivations& a, Index i0, const Int4PanelLayout& w, Index p0,
                         float (&out)[MR][NP * 16]) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const std::uint8_t* blocks[NP];
  ORDO_UNROLL
  for (int j = 0; j < NP; ++j) blocks[j] = w.blocks(p0 + j);
  __m512 t[MR][NP];
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i)
    ORDO_UNROLL
    for (int j = 0; j < NP; ++j) t[i][j] = _mm512_setzero_ps();
  const Index group = w.group;
  for (Index g = 0; g < w.groups(); ++g) {
    __m512i p[MR][NP];
    ORDO_UNROLL
    for (int i = 0; i < MR; ++i) {
      const __m512i offset = _mm512_set1_epi32(-8 * a.sums(i0 + i)[g]);
      ORDO_UNROLL
      for (int j = 0; j < NP; ++j) p[i][j] = offset;
    }
    for (Index b = g * group / 8; b < (g + 1) * group / 8; ++b) {
      __m512i lo[NP], hi[NP];
      ORDO_UNROLL
      for (int j = 0; j < NP; ++j) {
        const __m512i bytes = _mm512_loadu_si512(blocks[j] + 64 * b);
        if constexpr (MR == 1) prefetch_ahead(blocks[j] + 64 * b);
        lo[j] = _mm512_and_si512(bytes, low);
        hi[j] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low);
      }
      ORDO_UNROLL
      for (int i = 0; i < MR; ++i) {
        const std::int8_t* q = a.q(i0 + i) + 8 * b;
        const __m512i q_lo = _mm512_set1_epi32(four_bytes(q)), q_hi = _mm512_set1_epi32(four_bytes(q + 4));
        ORDO_UNROLL
        for (int j = 0; j < NP; ++j) {
          p[i][j] = _mm512_dpbusd_epi32(p[i][j], lo[j], q_lo);
          p[i][j] = _mm512_dpbusd_epi32(p[i][j], hi[j], q_hi);
        }
      }
    }
    ORDO_UNROLL
    for (int j = 0; j < NP; ++j) {
      const __m512 scales =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.scales(p0 + j, g))));
      ORDO_UNROLL
      for (int i = 0; i < MR; ++i) {
        const __m512 c = _mm512_mul_ps(_mm512_set1_ps(a.scales(i0 + i)[g]), scales);
        t[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[i][j]), c, t[i][j]);
      }
    }
  }
  ORDO_UNROLL
  for (int i = 0; i < MR; ++i)
    ORDO_UNROLL
    for (int j = 0; j < NP; ++j) _mm512_storeu_ps(out[i] + 16 * j, t[i][j]);
}

template <int MR, int NP>
ORDO_VNNI void run_vnni(const QuantizedActivations& a, Index i0, const Int4PanelLayout& w, Index p0, const Output& out) {
  float values[MR][NP * 16];
  tile_vnni<MR, NP>(a, i0, w, p0, values);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NP; ++j) {
      const Index p = p0 + j;
      if (out.whole(p))
        std::copy_n(values[i] + 16 * j, 16, out.at(i0 + i, p * kInt4PanelRows));
      else
        out.store_part(i0 + i, p, values[i] + 16 * j);
    }
}

// One row (a decode step): 4 panels at a time, four streams of independent sums; more
// rows: 4 rows against 2 panels a tile, the pair of panels in cache for every tile.
ORDO_VNNI void product_vnni(const QuantizedActivations& a, const Int4PanelLayout& w, PanelRange panels,
                            const Output& out) {
  Index p = panels.begin;
  if (a.rows() == 1) {
    for (; p + 4 <= panels.end; p += 4) run_vnni<1, 4>(a, 0, w, p, out);
    for (; p < panels.end; ++p) run_vnni<1, 1>(a, 0, w, p, out);
    return;
  }
  for (; p < panels.end; p += 2) {
    const bool pair = p + 2 <= panels.end;
    Index i = 0;
    for (; i + 4 <= a.rows(); i += 4) {
      if (pair)
        run_vnni<4, 2>(a, i, w, p, out);
      else
        run_vnni<4, 1>(a, i, w, p, out);
    }
    for (; i < a.rows(); ++i) {
      if (pair)
        run_vnni<1, 2>(a, i, w, p, out);
      else
        run_vnni<1, 1>(a, i, w, p, out);
    }
  }
}
#endif

}  // namespace

void int4_product(KernelPath path, const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count,
                  float* y, Index y_stride) {
  if (!w.int4_in_panels())
    throw Error("kernels::int4_product",
                "an int4 matrix in the file's layout, which is for row lookups only: products read panels",
                "a bug in ordo's weight binding (models/stored_matrix.cpp); please report it");
  const Int4PanelLayout layout = w.int4_panels();
  const PanelRange panels(first, count);
  const Output out{y, y_stride, first, count};
#if defined(__x86_64__)
  if (path >= KernelPath::Avx512 && avx512::cpu_has_vnni()) return product_vnni(a, layout, panels, out);
  if (path >= KernelPath::Avx2) return product_avx2(a, layout, panels, out);
#else
  (void)path;
#endif
  product_portable(a, layout, panels, out);
}

}  // namespace ordo::kernels
