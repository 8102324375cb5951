// The position-wise feed-forward block: fc2(act(fc1(x))).
//   x [T, d] -> hidden [T, ffn] -> out [T, d]
#pragma once

#include "engine/ops.h"
#include "engine/tensor.h"

namespace ordo {

class FeedForward {
 public:
  FeedForward(Linear fc1, Linear fc2, Activation activation)
      : fc1_(std::move(fc1)), fc2_(std::move(fc2)), activation_(activation) {}

  // `hidden` is scratch, resized to [T, ffn].
  void forward(ConstMatrixRef x, Matrix& hidden, MatrixRef out) const {
    hidden.resize(x.rows(), fc1_.out_features());
    ops::linear(x, fc1_, hidden);
    ops::activate(activation_, hidden);
    ops::linear(hidden.view(), fc2_, out);
  }

  Index hidden_dim() const { return fc1_.out_features(); }

 private:
  Linear fc1_;
  Linear fc2_;
  Activation activation_;
};

}  // namespace ordo
