// Where the layer norm sits around a sublayer f (attention or feed-forward):
//
//   post-norm (Vaswani et al., BART, Marian):  x <- LN(x + f(x))
//   pre-norm  (GPT-2, LLaMA, most deep stacks): x <- x + f(LN(x))
//
// Encoder and decoder layers are written once in terms of this block.
#pragma once

#include "engine/ops.h"
#include "engine/tensor.h"

namespace ordo {

struct NormPlacement {
  bool before = false;  // true: pre-norm
  float eps = 1e-5f;
};

// Buffers for one residual block, reused across blocks and steps.
struct ResidualScratch {
  Matrix normed;  // [T, d], LN(x) for pre-norm
  Matrix delta;   // [T, d], f's output
};

// f(ConstMatrixRef in [T, d], MatrixRef out [T, d]).
template <class Sublayer>
void residual_block(MatrixRef x, const NormWeights& norm, const NormPlacement& placement,
                    ResidualScratch& scratch, Sublayer&& f) {
  scratch.delta.resize(x.rows(), x.cols());
  if (placement.before) {
    scratch.normed.resize(x.rows(), x.cols());
    ops::normalize(x, norm, placement.eps, scratch.normed);
    f(scratch.normed.view(), scratch.delta.view());
    ops::add(x, scratch.delta);
  } else {
    f(ConstMatrixRef(x), scratch.delta.view());
    ops::add(x, scratch.delta);
    ops::normalize(x, norm, placement.eps, x);
  }
}

}  // namespace ordo
