#include "engine/integer_product_amx.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/integer_product.h"
#include "engine/integer_product_internal.h"

#if defined(__x86_64__)
// As in integer_product_avx512.cpp: GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized
// (GCC bug 105593, fixed in GCC 13).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

namespace ordo::kernels::amx {

namespace {
// Lanes of 32 bytes at least: a group of 256 weights.
constexpr Index kGroupMultiple = 256;
}  // namespace

bool takes(const QuantizedActivations& a, const WeightMatrix& w) {
  return w.format() == WeightFormat::Int8 && w.group() % kGroupMultiple == 0 && a.rows() >= kMinRows;
}

#if defined(__x86_64__)

namespace {

#define ORDO_AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx2,fma")))

// The tiles: 0-3 the sums of a block of 32 activation rows x 32 weight rows (rows 0-15
// against weight rows 0-15, 0-15 x 16-31, 16-31 x 0-15, 16-31 x 16-31), 4-5 the
// activations of rows 0-15 and 16-31, 6-7 the weights of rows 0-15 and 16-31. Every tile
// is 16 rows of 64 bytes: the activations' 64 bytes are sixteen four-byte steps of one
// lane, and the weights' rows are those steps, each holding sixteen weight rows' four
// bytes (the layout TDPBSSD multiplies: C[m][n] += sum of A[m][4t + j] B[t][4n + j]).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

constexpr int kBlock = 32;                   // rows of activations, and of weights, a block
constexpr Index kTileBytes = 16 * 64;        // one tile
constexpr Index kLaneChunk = 64;             // one lane's bytes in a tile row
constexpr Index kStepsPerChunk = kLaneChunk / 4;
// Rows of activations copied at a time: at most 256 x the width bytes a thread (twice
// that for groups of 256, whose lanes are padded), and each weight panel copied once per
// 256 rows. One thread, int8 per row, GMAC/s with 256 / 512 / all rows at once: M 512 K 512
// N 2048 358 / 318 / 325; M 512 K 2048 N 768 762 / 799 / 783; M 2048 K 768 N 3072 290 / 297 / 225.
constexpr Index kCopiedRows = 256;

// Where each lane of each group sits in the copies. A lane of a group of G is G / 8
// bytes: G / 32 steps of four, one from each run of 32. Padded with zeros to whole
// tile rows (a lane of 96 bytes, from rows of 768 weights, takes two). Both copies are
// tiles side by side, each 16 rows of 64 bytes: tile (rows 16 s to 16 s + 15, group g,
// lane l, chunk c) of the activations, and of a panel's weights, whose rows are steps.
// A tile is 1 KiB in a row, which loads as 16 sequential cache lines.
struct Layout {
  Index group, groups, steps, lane_bytes, chunks;
  explicit Layout(const QuantizedActivations& a)
      : group(a.group()),
        groups(a.groups()),
        steps(a.group() / 32),
        lane_bytes((a.group() / 8 + kLaneChunk - 1) / kLaneChunk * kLaneChunk),
        chunks(lane_bytes / kLaneChunk) {}
  Index tile_offset(Index sixteen, Index g, int l, Index c) const {
    return (((sixteen * groups + g) * 8 + l) * chunks + c) * kTileBytes;
  }
  // The tiles of 16 rows: one copy of each of their lanes.
  Index sixteen_bytes() const { return groups * 8 * chunks * kTileBytes; }
};

// An 8 x 8 block of 32-bit values transposed in place: r[i][j] becomes r[j][i].
ORDO_AMX inline void transpose8(__m256i (&r)[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(_mm256_castsi256_ps(r[i]), _mm256_castsi256_ps(r[i + 1]));
    t[i + 1] = _mm256_unpackhi_ps(_mm256_castsi256_ps(r[i]), _mm256_castsi256_ps(r[i + 1]));
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_castps_si256(_mm256_permute2f128_ps(s[i], s[i + 4], 0x20));
    r[i + 4] = _mm256_castps_si256(_mm256_permute2f128_ps(s[i], s[i + 4], 0x31));
  }
}

ORDO_AMX inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
ORDO_AMX inline void store32(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }

// Rows [first, first + count) of a's q, lane by lane, as tiles (count up to a multiple
// of 32, zeros past a's last row). Eight runs of 32 at a time: run i's lanes are the
// eight 32-bit values of its vector, so the transposed block holds each lane's eight steps.
ORDO_AMX void copy_activations(const QuantizedActivations& a, Index first, Index count, const Layout& layout,
                               std::vector<std::int8_t>& out) {
  const Index rows = (count + kBlock - 1) / kBlock * kBlock;
  const Index written = layout.steps * 4 % kLaneChunk;  // bytes of a lane's last tile row; zeros after them
  out.resize(static_cast<std::size_t>(rows / 16 * layout.sixteen_bytes()));
  for (Index r = 0; r < rows; ++r) {
    std::int8_t* const tiles = out.data() + r % 16 * 64;
    const Index sixteen = r / 16, i = first + r;
    if (i >= a.rows()) {
      for (Index g = 0; g < layout.groups; ++g)
        for (int l = 0; l < 8; ++l)
          for (Index c = 0; c < layout.chunks; ++c)
            std::fill_n(tiles + layout.tile_offset(sixteen, g, l, c), 64, std::int8_t{0});
      continue;
    }
    for (Index g = 0; g < layout.groups; ++g) {
      const std::int8_t* q = a.q(i) + g * layout.group;
      for (Index step = 0; step < layout.steps; step += 8) {
        __m256i block[8];
        for (int run = 0; run < 8; ++run) block[run] = load32(q + (step + run) * 32);
        transpose8(block);
        for (int l = 0; l < 8; ++l)
          store32(tiles + layout.tile_offset(sixteen, g, l, step / kStepsPerChunk) + step % kStepsPerChunk * 4, block[l]);
      }
      if (written != 0)
        for (int l = 0; l < 8; ++l)
          std::fill_n(tiles + layout.tile_offset(sixteen, g, l, layout.chunks - 1) + written, 64 - written,
                      std::int8_t{0});
    }
  }
}

// Weight rows [begin, end) (at most 32) as the weight tiles, and their scales at
// scales[(b * groups + g) * 16 + n] for row begin + 16 b + n (zeros past end). Each
// step of eight weight rows at a time: row i's run holds the eight lanes' steps, so the
// transposed block holds, for each lane, the eight rows' four bytes side by side.
ORDO_AMX void copy_weights(const WeightMatrix& w, Index begin, Index end, const Layout& layout,
                           std::vector<std::int8_t>& out, std::vector<float>& scales) {
  out.resize(static_cast<std::size_t>(2 * layout.sixteen_bytes()));
  scales.assign(static_cast<std::size_t>(2 * layout.groups * 16), 0.0f);
  if (layout.steps % kStepsPerChunk != 0) {  // a lane's last tile ends in rows of zeros
    const Index zero_rows = kStepsPerChunk - layout.steps % kStepsPerChunk;
    for (int b = 0; b < 2; ++b)
      for (Index g = 0; g < layout.groups; ++g)
        for (int l = 0; l < 8; ++l)
          std::fill_n(out.data() + layout.tile_offset(b, g, l, layout.chunks) - zero_rows * 64, zero_rows * 64,
                      std::int8_t{0});
  }
  for (int b = 0; b < 2; ++b)
    for (int eighth = 0; eighth < 2; ++eighth) {  // rows past end: zeros
      const Index first_row = begin + b * 16 + eighth * 8;
      const std::int8_t* rows[8];
      for (int i = 0; i < 8; ++i) rows[i] = first_row + i < end ? w.row<std::int8_t>(first_row + i) : nullptr;
      for (Index g = 0; g < layout.groups; ++g) {
        for (int i = 0; i < 8; ++i)
          if (rows[i] != nullptr) scales[static_cast<std::size_t>((b * layout.groups + g) * 16 + eighth * 8 + i)] =
                                      integer_detail::weight_scale(w, first_row + i, g);
        for (Index step = 0; step < layout.steps; ++step) {
          __m256i block[8];
          const Index at = g * layout.group + step * 32;
          for (int i = 0; i < 8; ++i) block[i] = rows[i] != nullptr ? load32(rows[i] + at) : _mm256_setzero_si256();
          transpose8(block);
          const Index chunk = step / kStepsPerChunk, tile_row = step % kStepsPerChunk;
          for (int l = 0; l < 8; ++l)
            store32(out.data() + layout.tile_offset(b, g, l, chunk) + tile_row * 64 + eighth * 32, block[l]);
        }
      }
    }
}

// What one thread keeps between products: the copies, and a block's sums and totals.
struct Scratch {
  std::vector<std::int8_t> activations, weights;
  std::vector<float> weight_scales;
  std::vector<float> c;                             // c_g of the block, [g][activation row][weight row]
  // Several groups (block()): tiles 0-3 as stored for two steps in turn; t[g mod 2] of
  // one lane and u[l] = t[0] + t[1] of every lane, [activation row][weight row].
  alignas(64) std::int32_t sums[2][4][16][16];
  alignas(64) float totals[2][kBlock][kBlock];
  alignas(64) float lanes[8][kBlock][kBlock];
  // One group (single_group_block()): tiles 0-3 of every lane.
  alignas(64) std::int32_t lane_sums[8][4][16][16];
};

// Tiles 0-3 = the sums of lane l of group g, the copy's activation rows [r0, r0 + 32)
// against the panel's 32 weight rows: zeroed, then each chunk of the lane multiplied
// into all four.
ORDO_AMX inline void multiply_lane(const Layout& layout, Index r0, Index g, int l, const Scratch& s) {
  // GCC's tile load is an asm statement that names no memory: without this barrier the
  // compiler may move the copies' stores past the loads that read them.
  asm volatile("" ::: "memory");
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (Index c = 0; c < layout.chunks; ++c) {
    _tile_loadd(4, s.activations.data() + layout.tile_offset(r0 / 16, g, l, c), 64);
    _tile_loadd(5, s.activations.data() + layout.tile_offset(r0 / 16 + 1, g, l, c), 64);
    _tile_loadd(6, s.weights.data() + layout.tile_offset(0, g, l, c), 64);
    _tile_loadd(7, s.weights.data() + layout.tile_offset(1, g, l, c), 64);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
}

ORDO_AMX inline void store_tiles(std::int32_t (&sums)[4][16][16]) {
  _tile_stored(0, sums[0], 64);
  _tile_stored(1, sums[1], 64);
  _tile_stored(2, sums[2], 64);
  _tile_stored(3, sums[3], 64);
}

// y = ((u0 + u4) + (u2 + u6)) + ((u1 + u5) + (u3 + u7)) for 16 weight rows at once,
// stored for the `left` of them that exist (at most 16).
ORDO_AMX inline void store_sum(const __m512 (&u)[8], float* y, Index left) {
  const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(u[0], u[4]), _mm512_add_ps(u[2], u[6])),
                                   _mm512_add_ps(_mm512_add_ps(u[1], u[5]), _mm512_add_ps(u[3], u[7])));
  _mm512_mask_storeu_ps(y, static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1), sum);
}

// c_g = s_g * w_scale_g for the block's activation rows from i0 (0 past the last) and
// the panel's weight rows.
ORDO_AMX void block_scales(const QuantizedActivations& a, const Layout& layout, Index i0, Scratch& s) {
  s.c.resize(static_cast<std::size_t>(layout.groups * kBlock * kBlock));
  for (Index g = 0; g < layout.groups; ++g)
    for (int r = 0; r < kBlock; ++r) {
      const __m512 activation_scale = _mm512_set1_ps(i0 + r < a.rows() ? a.scales(i0 + r)[g] : 0.0f);
      for (int b = 0; b < 2; ++b)
        _mm512_storeu_ps(s.c.data() + (g * kBlock + r) * kBlock + b * 16,
                         _mm512_mul_ps(activation_scale,
                                       _mm512_loadu_ps(s.weight_scales.data() + (b * layout.groups + g) * 16)));
    }
}

// The float step of group g of lane l from the sums of its tiles: t[g mod 2] =
// fma(float(P), c_g, t[g mod 2]), vectorized across the 16 weight rows of a tile row
// (each group's first step starts from t = 0 without reading it); after the lane's last
// group, u[l] = t[0] + t[1]. For two groups or more.
ORDO_AMX void float_step(const Layout& layout, Index g, int l, const std::int32_t (&sums)[4][16][16], Scratch& s) {
  float (&t)[kBlock][kBlock] = s.totals[g % 2];
  for (int half = 0; half < 2; ++half)
    for (int r = 0; r < 16; ++r)
      for (int b = 0; b < 2; ++b) {
        const Index row = half * 16 + r;
        const __m512 p = _mm512_cvtepi32_ps(_mm512_load_si512(sums[half * 2 + b][r]));
        const __m512 c = _mm512_loadu_ps(s.c.data() + (g * kBlock + row) * kBlock + b * 16);
        const __m512 before = g < 2 ? _mm512_setzero_ps() : _mm512_load_ps(&t[row][b * 16]);
        _mm512_store_ps(&t[row][b * 16], _mm512_fmadd_ps(p, c, before));
      }
  if (g + 1 < layout.groups) return;
  for (int row = 0; row < kBlock; ++row)
    for (int b = 0; b < 2; ++b) {
      _mm512_store_ps(&s.lanes[l][row][b * 16], _mm512_add_ps(_mm512_load_ps(&s.totals[0][row][b * 16]),
                                                             _mm512_load_ps(&s.totals[1][row][b * 16])));
    }
}

// The block of activation rows [i0, i0 + 32) (in the copy from row copied) and the
// panel's 32 weight rows, for two groups or more: lane by lane, each group's sums on the
// tiles, then the definition's float step for the group.
// A lane's totals are complete after its last group (a lane's steps never read
// another's), which keeps one lane's t at a time. The float step of each (lane, group)
// runs while the tiles compute the next one's sums: the tiles' results are stored only
// after it, into the other of two buffers.
ORDO_AMX void block(const QuantizedActivations& a, const Layout& layout, Index i0, Index copied, Scratch& s) {
  block_scales(a, layout, i0, s);
  const Index steps = 8 * layout.groups;
  for (Index step = 0; step <= steps; ++step) {
    if (step < steps) {
      const int l = static_cast<int>(step / layout.groups);
      const Index g = step % layout.groups;
      multiply_lane(layout, i0 - copied, g, l, s);
    }
    if (step > 0) {
      const Index previous = step - 1;
      float_step(layout, previous % layout.groups, static_cast<int>(previous / layout.groups), s.sums[previous % 2], s);
    }
    if (step < steps) store_tiles(s.sums[step % 2]);
  }
}

// One group (int8 with one scale a row, the usual case): a lane's sums are final when
// its tiles are, so the eight lanes' tiles are stored first, and each output's float
// steps and sum then run in registers: u_l = fma(float(P_l), c, 0) + 0, the definition's
// t[0] plus a t[1] that no group touched. Half the float instructions of block() and
// none of its stores of t and u. Results for the rows [i0, i0 + 32) that exist (in the
// copy from row copied) and the weight rows [panel, end) at y (row i0, weight row panel).
ORDO_AMX void single_group_block(const QuantizedActivations& a, const Layout& layout, Index i0, Index copied,
                                 Index panel, Index end, Scratch& s, float* y, Index y_stride) {
  block_scales(a, layout, i0, s);
  for (int l = 0; l < 8; ++l) {
    multiply_lane(layout, i0 - copied, 0, l, s);
    store_tiles(s.lane_sums[l]);
  }
  const Index rows = std::min<Index>(kBlock, a.rows() - i0);
  const __m512 zero = _mm512_setzero_ps();
  for (Index row = 0; row < rows; ++row)
    for (int b = 0; b < 2 && panel + b * 16 < end; ++b) {
      const __m512 c = _mm512_loadu_ps(s.c.data() + row * kBlock + b * 16);
      __m512 u[8];
      for (int l = 0; l < 8; ++l) {
        const __m512 p = _mm512_cvtepi32_ps(_mm512_load_si512(s.lane_sums[l][row / 16 * 2 + b][row % 16]));
        u[l] = _mm512_add_ps(_mm512_fmadd_ps(p, c, zero), zero);
      }
      store_sum(u, y + (i0 + row) * y_stride + b * 16, end - panel - b * 16);
    }
}

}  // namespace

// Up to kCopiedRows rows of activations copied at a time, then panels of 32 weight rows,
// each copied once and met by every block of 32 of those rows. The copy is this thread's
// (engine/blas.cpp runs a product's weight rows on several threads, each with all its
// rows of activations): bounded, it stays small however long the prompt, and in the
// core's own cache while the panels pass.
ORDO_AMX void integer_product(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                              Index y_stride) {
  thread_local const std::unique_ptr<Scratch> scratch = std::make_unique<Scratch>();  // 44 KiB: not on the stack
  Scratch& s = *scratch;
  const Layout layout(a);
  TileConfig config;
  for (int tile = 0; tile < 8; ++tile) {
    config.rows[tile] = 16;
    config.bytes_per_row[tile] = 64;
  }
  _tile_loadconfig(&config);
  for (Index copied = 0; copied < a.rows(); copied += kCopiedRows) {
    const Index copied_end = std::min(a.rows(), copied + kCopiedRows);
    copy_activations(a, copied, copied_end - copied, layout, s.activations);
    for (Index panel = first; panel < first + count; panel += kBlock) {
      const Index end = std::min(first + count, panel + kBlock);
      copy_weights(w, panel, end, layout, s.weights, s.weight_scales);
      for (Index i0 = copied; i0 < copied_end; i0 += kBlock) {
        if (layout.groups == 1) {
          single_group_block(a, layout, i0, copied, panel, end, s, y + (panel - first), y_stride);
          continue;
        }
        block(a, layout, i0, copied, s);
        const Index rows = std::min<Index>(kBlock, a.rows() - i0);
        for (Index row = 0; row < rows; ++row)
          for (int b = 0; b < 2 && panel + b * 16 < end; ++b) {
            __m512 u[8];
            for (int l = 0; l < 8; ++l) u[l] = _mm512_load_ps(&s.lanes[l][row][b * 16]);
            store_sum(u, y + (i0 + row) * y_stride + (panel + b * 16 - first), end - panel - b * 16);
          }
      }
    }
  }
  _tile_release();
}

#endif

}  // namespace ordo::kernels::amx
