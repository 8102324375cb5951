// Keys and values of one attention layer for a set of sequences, sized once.
//
// Storage is [slots, capacity, width]: one slot per sequence, its rows contiguous, so
// that attention reads a sequence's history as one strided matrix and hands it to
// GEMM as is. Which sequence lives in which slot is the caller's business
// (DecoderState keeps that table for all layers at once): reordering beams then moves
// slot numbers, and copies rows only for a parent that more than one beam continues
// (copy_slot). Capacity is fixed at reset(), so decoding never reallocates.
//
// Cross-attention uses the same storage with a slot per *source*: its K/V are written
// once (all_keys / all_values, one GEMM over the padded encoder output) and shared by
// every beam of that source.
#pragma once

#include <algorithm>
#include <utility>

#include "engine/tensor.h"

namespace ordo {

class KeyValueCache {
 public:
  // Makes room for `slots` x `capacity` rows of width `width`; contents unspecified.
  void reset(Index slots, Index capacity, Index width) {
    slots_ = slots;
    capacity_ = capacity;
    keys_.resize(slots * capacity, width);
    values_.resize(slots * capacity, width);
  }

  // Makes room for at least `slots` x `capacity` rows, keeping every slot's rows: a
  // live set that admits a longer or one more sequence (continuous batching).
  void grow(Index slots, Index capacity) {
    slots = std::max(slots, slots_);
    capacity = std::max(capacity, capacity_);
    if (slots == slots_ && capacity == capacity_) return;
    grow_matrix(keys_, slots, capacity);
    grow_matrix(values_, slots, capacity);
    slots_ = slots;
    capacity_ = capacity;
  }

  Index slots() const { return slots_; }
  Index capacity() const { return capacity_; }
  Index width() const { return keys_.cols(); }

  // Rows [first, first + count) of a slot. Asserted in range: callers size the cache.
  MatrixRef keys(Index slot, Index first, Index count) { return block(keys_, slot, first, count); }
  MatrixRef values(Index slot, Index first, Index count) { return block(values_, slot, first, count); }
  ConstMatrixRef keys(Index slot, Index first, Index count) const {
    return block(keys_, slot, first, count);
  }
  ConstMatrixRef values(Index slot, Index first, Index count) const {
    return block(values_, slot, first, count);
  }

  // Every slot at once, [slots * capacity, width].
  MatrixRef all_keys() { return keys_.view(); }
  MatrixRef all_values() { return values_.view(); }

  // The first `rows` rows of slot `from` -> slot `to` (a beam continued twice).
  void copy_slot(Index from, Index to, Index rows) {
    copy_rows(keys_, from, to, rows);
    copy_rows(values_, from, to, rows);
  }

  // The first `rows` rows of `other`'s slot `from` -> this cache's slot `to` (a source
  // projected on its own, joining a live set).
  void copy_slot(const KeyValueCache& other, Index from, Index to, Index rows) {
    const ConstMatrixRef k = other.keys(from, 0, rows), v = other.values(from, 0, rows);
    std::copy(k.data(), k.data() + rows * width(), keys(to, 0, rows).data());
    std::copy(v.data(), v.data() + rows * width(), values(to, 0, rows).data());
  }

 private:
  MatrixRef block(Matrix& m, Index slot, Index first, Index count) const {
    return MatrixRef(m.view()).row_block(slot * capacity_ + first, count);
  }
  ConstMatrixRef block(const Matrix& m, Index slot, Index first, Index count) const {
    return m.view().row_block(slot * capacity_ + first, count);
  }
  void grow_matrix(Matrix& m, Index slots, Index capacity) const {
    Matrix grown(slots * capacity, m.cols());
    for (Index slot = 0; slot < slots_; ++slot) {
      const float* rows = m.data() + slot * capacity_ * m.cols();
      std::copy(rows, rows + capacity_ * m.cols(), grown.data() + slot * capacity * m.cols());
    }
    m = std::move(grown);
  }
  void copy_rows(Matrix& m, Index from, Index to, Index rows) {
    const float* source = m.data() + from * capacity_ * m.cols();
    std::copy(source, source + rows * m.cols(), m.data() + to * capacity_ * m.cols());
  }

  Matrix keys_;
  Matrix values_;
  Index slots_ = 0;
  Index capacity_ = 0;
};

}  // namespace ordo
