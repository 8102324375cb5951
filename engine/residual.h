// Where the layer norm sits around a sublayer f (attention or feed-forward):
//
//   post-norm (Vaswani et al., BART, Marian):  x <- LN(x + f(x))
//   pre-norm  (GPT-2, LLaMA, most deep stacks): x <- x + f(LN(x))
//
// A layer reads as the sublayers it runs, each between the two calls below:
//
//   const ConstMatrixRef in = norm_before(x, norm, placement, scratch);  // LN(x) or x
//   f(in, scratch.delta);                                               // the sublayer
//   add_and_norm_after(x, norm, placement, scratch);                    // x + delta [, LN]
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
  Matrix delta;   // [T, d], the sublayer's output
};

// The sublayer's input: LN(x) (pre-norm, written to scratch.normed), or x itself
// (post-norm). Sizes scratch.delta [T, d] for the sublayer's output.
inline ConstMatrixRef norm_before(ConstMatrixRef x, const NormWeights& norm, const NormPlacement& placement,
                                  ResidualScratch& scratch) {
  scratch.delta.resize(x.rows(), x.cols());
  if (!placement.before) return x;
  scratch.normed.resize(x.rows(), x.cols());
  ops::normalize(x, norm, placement.eps, scratch.normed);
  return scratch.normed.view();
}

// After the sublayer wrote scratch.delta: x += delta, then LN(x) in place (post-norm).
inline void add_and_norm_after(MatrixRef x, const NormWeights& norm, const NormPlacement& placement,
                               ResidualScratch& scratch) {
  ops::add(x, scratch.delta);
  if (!placement.before) ops::normalize(x, norm, placement.eps, x);
}

}  // namespace ordo
