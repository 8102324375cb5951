// How the rows of an activation matrix belong to sequences.
//
// ordo runs a set of sequences at once (a batch of sources, or batch x beam hypotheses
// while decoding). An activation is then one [S*T, d] matrix: sequence s owns the T rows
// [s*T, (s+1)*T). Its first lengths[s] rows are real tokens, at steps
// first_steps[s] + t (position = position_offset + step); the rows after them are
// padding: computed like the others, never seen by a real row (their keys are outside
// every attention window), never part of a result.
//
//   encoder, B sources padded to L:   S = B, T = L, first_steps = 0, lengths = source lengths
//   decoder, one search step:         S = live sequences, T = 1, first_steps = tokens so far
//   decoder, teacher-forced scoring:  S = B, T = longest target, lengths = target lengths
#pragma once

#include <span>

#include "engine/tensor.h"

namespace ordo {

struct BatchRows {
  Index rows_per_sequence = 0;          // T
  std::span<const Index> first_steps;   // [S]: the step of each sequence's first row
  std::span<const Index> lengths;       // [S]: real rows of each sequence, each <= T

  Index sequences() const { return static_cast<Index>(first_steps.size()); }
  Index rows() const { return sequences() * rows_per_sequence; }
  Index first_step(Index s) const { return first_steps[static_cast<std::size_t>(s)]; }
  Index length(Index s) const { return lengths[static_cast<std::size_t>(s)]; }
  // Rows of sequence s in a [S*T, w] matrix, padding included.
  template <class T>
  MatrixSpan<T> of(MatrixSpan<T> m, Index s) const {
    return m.row_block(s * rows_per_sequence, rows_per_sequence);
  }
};

// Throws Error unless rows fits a matrix of `matrix_rows` rows and lengths <= T.
void check_batch_rows(const char* where, const BatchRows& rows, Index matrix_rows);

}  // namespace ordo
