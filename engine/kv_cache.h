// Keys and values of one attention layer, sized once, appended to step by step.
//
// Decoder self-attention appends the K/V rows of each new token; cross-attention fills
// its cache once per source sentence and only reads it afterwards. Capacity is fixed at
// reset(), so decoding never reallocates.
#pragma once

#include "engine/error.h"
#include "engine/tensor.h"

namespace ordo {

class KeyValueCache {
 public:
  // Empties the cache and makes room for `capacity` rows of width `width`.
  void reset(Index capacity, Index width) {
    keys_.resize(capacity, width);
    values_.resize(capacity, width);
    length_ = 0;
  }
  void clear() { length_ = 0; }

  Index length() const { return length_; }
  Index capacity() const { return keys_.rows(); }

  // Claims the next `rows` rows for the caller to write K and V into.
  struct Rows {
    MatrixRef keys;
    MatrixRef values;
  };
  Rows append(Index rows) {
    if (length_ + rows > capacity())
      throw Error("KV cache", "appending " + std::to_string(rows) + " rows to " +
                                  std::to_string(length_) + " exceeds the capacity of " +
                                  std::to_string(capacity()) + " steps",
                  "a bug in the caller: the decoder state was sized too small");
    Rows claimed{keys_.view().row_block(length_, rows), values_.view().row_block(length_, rows)};
    length_ += rows;
    return claimed;
  }

  ConstMatrixRef keys() const { return keys_.view().row_block(0, length_); }
  ConstMatrixRef values() const { return values_.view().row_block(0, length_); }

 private:
  Matrix keys_;
  Matrix values_;
  Index length_ = 0;
};

}  // namespace ordo
