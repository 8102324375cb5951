// The position-wise feed-forward block, in its two kinds:
//   plain (Vaswani, BART, Marian):   out = fc2(act(fc1(x)))
//   gated (Shazeer's GLU variants):  out = down(act(gate(x)) * up(x))  (SwiGLU when act is SiLU: LLaMA)
//   x [T, d] -> hidden [T, ffn] -> out [T, d]
#pragma once

#include "engine/ops.h"
#include "engine/tensor.h"

namespace ordo {

enum class FeedForwardKind { Plain, Gated };

// Buffers for one forward(), reused across layers and steps.
struct FeedForwardScratch {
  Matrix hidden;  // [T, ffn]: act(fc1 x), or act(gate x) * up x
  Matrix up;      // [T, ffn]: up x (gated only)
};

class FeedForward {
 public:
  // fc2(act(fc1 x)).
  static FeedForward plain(Linear fc1, Linear fc2, Activation activation) {
    return FeedForward(FeedForwardKind::Plain, std::move(fc1), {}, std::move(fc2), activation);
  }
  // down(act(gate x) * up x).
  static FeedForward gated(Linear gate, Linear up, Linear down, Activation activation) {
    return FeedForward(FeedForwardKind::Gated, std::move(gate), std::move(up), std::move(down), activation);
  }

  void forward(ConstMatrixRef x, FeedForwardScratch& scratch, MatrixRef out) const {
    scratch.hidden.resize(x.rows(), hidden_dim());
    ops::linear(x, first_, activation_, scratch.hidden);
    if (kind_ == FeedForwardKind::Gated) {
      scratch.up.resize(x.rows(), hidden_dim());
      ops::linear(x, up_, scratch.up);
      ops::multiply(scratch.hidden, scratch.up);
    }
    ops::linear(scratch.hidden.view(), last_, out);
  }

  // Reserves what forward() needs for up to `rows` rows, so that it allocates nothing.
  void reserve(FeedForwardScratch& scratch, Index rows) const {
    scratch.hidden.reserve(rows * hidden_dim());
    if (kind_ == FeedForwardKind::Gated) scratch.up.reserve(rows * hidden_dim());
  }

  FeedForwardKind kind() const { return kind_; }
  Index hidden_dim() const { return first_.out_features(); }

 private:
  FeedForward(FeedForwardKind kind, Linear first, Linear up, Linear last, Activation activation)
      : kind_(kind), first_(std::move(first)), up_(std::move(up)), last_(std::move(last)), activation_(activation) {}

  FeedForwardKind kind_;
  Linear first_;  // fc1, or gate
  Linear up_;     // gated only
  Linear last_;   // fc2, or down
  Activation activation_;
};

}  // namespace ordo
