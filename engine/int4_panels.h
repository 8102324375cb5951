// Int4 weights as the products read them: panels of 16 weight rows, each panel's weights
// of one group side by side, so that a vector instruction multiplies 16 rows' weights
// at once (one 32-bit lane per row, as VNNI's vpdpbusd and AVX2's vpmaddubsw sum four
// adjacent bytes) and a group ends in one float step for 16 rows. The file keeps
// ordo's stored layout (runs of 32, README "Quantized weights"); the loader arranges
// each int4 matrix into panels once, as llama.cpp repacks Q4_0 for its wider kernels.
//
// The arrangement, for rows r = 16 p + o (o in 0..15) of panel p, and n[r][k] the
// stored nibble (weight + 8, 0..15):
//   blocks   panels x (8 cols) bytes, then scales: panel p's blocks are cols / 8 blocks
//            of 64 bytes; block b's byte 4 o + j (j in 0..3) holds n[r][8 b + j] in its
//            low nibble and n[r][8 b + 4 + j] in its high one. The low nibbles of a
//            block are thus four adjacent weights of each of the 16 rows, a row a lane;
//            the high nibbles the next four. (AVX2 reads a block as two halves: rows 0-7,
//            then 8-15.)
//   scales   F16, panel p's group g at (p groups + g) x 16: one per row o.
// A last panel of fewer than 16 rows is padded with rows of zero weights (n = 8) and
// scale 0, whose results nobody reads. The buffer starts on a 64-byte boundary (a block
// is a cache line).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/function_ref.h"
#include "engine/tensor.h"

namespace ordo {

class WeightMatrix;

// Weight rows a panel.
inline constexpr Index kInt4PanelRows = 16;

// A matrix of int4 weights arranged into panels, owning its bytes.
class Int4Panels {
 public:
  Int4Panels() = default;
  // From the stored layout: `runs` [rows, cols / 2] (runs of 32: byte j holds weight j
  // in its low nibble, j + 16 in its high one) and `scales` [rows, cols / group] F16.
  // cols and group are multiples of 32, group divides cols. Rows arrange on every thread;
  // each thread calls rows_done(first, end) (when given) as it finishes a stretch of
  // rows, whose stored bytes it will not read again: the loader lets the file's pages go
  // as it goes, so that the peak holds the panels and little of the file.
  Int4Panels(const std::uint8_t* runs, const std::uint16_t* scales, Index rows, Index cols, Index group);
  Int4Panels(const std::uint8_t* runs, const std::uint16_t* scales, Index rows, Index cols, Index group,
             FunctionRef<void(Index first, Index end)> rows_done);

  // The matrix, viewing these bytes (valid while this object lives and is not moved
  // from; moving keeps the bytes where they are).
  WeightMatrix view() const;
  // The bytes held (the arrangement, rounded up to whole pages).
  std::size_t bytes() const { return bytes_.get_deleter().size; }

 private:
  struct Unmap {
    Unmap() noexcept : size(0) {}
    explicit Unmap(std::size_t bytes) noexcept : size(bytes) {}
    void operator()(std::byte* address) const;
    std::size_t size;
  };
  std::unique_ptr<std::byte, Unmap> bytes_;  // an anonymous mapping (int4_panels.cpp says why)
  Index rows_ = 0, cols_ = 0, group_ = 0;
};

// Where the parts of an arranged matrix are, for the kernels and the row conversion.
struct Int4PanelLayout {
  const std::byte* start = nullptr;
  Index rows = 0, cols = 0, group = 0;

  Index panels() const { return (rows + kInt4PanelRows - 1) / kInt4PanelRows; }
  Index groups() const { return cols / group; }
  std::size_t panel_block_bytes() const { return static_cast<std::size_t>(cols) * 8; }
  // Panel p's blocks, and its 16 scales of group g.
  const std::uint8_t* blocks(Index p) const {
    return reinterpret_cast<const std::uint8_t*>(start) + static_cast<std::size_t>(p) * panel_block_bytes();
  }
  const std::uint16_t* scales(Index p, Index g) const {
    return reinterpret_cast<const std::uint16_t*>(start + static_cast<std::size_t>(panels()) * panel_block_bytes()) +
           (static_cast<std::size_t>(p) * static_cast<std::size_t>(groups()) + static_cast<std::size_t>(g)) * 16;
  }
  // Every byte: blocks and scales of all panels.
  std::size_t bytes() const {
    return static_cast<std::size_t>(panels()) * (panel_block_bytes() + static_cast<std::size_t>(groups()) * 32);
  }
  // Row r's weight k as its nibble n (the weight is (n - 8) x scale).
  int nibble(Index r, Index k) const {
    const std::uint8_t byte = blocks(r / kInt4PanelRows)[k / 8 * 64 + r % kInt4PanelRows * 4 + k % 4];
    return k % 8 < 4 ? byte & 0x0f : byte >> 4;
  }
  std::uint16_t scale(Index r, Index g) const { return scales(r / kInt4PanelRows, g)[r % kInt4PanelRows]; }
};

}  // namespace ordo
