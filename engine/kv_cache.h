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

 private:
  MatrixRef block(Matrix& m, Index slot, Index first, Index count) const {
    return MatrixRef(m.view()).row_block(slot * capacity_ + first, count);
  }
  ConstMatrixRef block(const Matrix& m, Index slot, Index first, Index count) const {
    return m.view().row_block(slot * capacity_ + first, count);
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
