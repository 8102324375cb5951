// Shape-checked tensor operations: the vocabulary the layers are written in.
//
// Every op checks its shapes and throws ordo::Error naming the op and all shapes on a
// mismatch. In-place use (same view as input and output) is allowed where noted.
#pragma once

#include <span>

#include "engine/epilogue.h"
#include "engine/tensor.h"
#include "engine/weight_matrix.h"

namespace ordo {

// A PyTorch Linear: weight [out, in] in its stored format, optional bias [out] (float32).
struct Linear {
  WeightMatrix weight;
  TensorView bias;  // empty() when the layer has no bias

  Index in_features() const { return weight.cols(); }
  Index out_features() const { return weight.rows(); }
};

// LayerNorm centres and scales each row, then applies weight and bias; RMSNorm (LLaMA,
// T5) only divides by the root mean square and applies weight.
enum class NormKind { LayerNorm, RmsNorm };

// A normalization layer's parameters, [d] each: LayerNorm with weight and (optional)
// bias, or RMSNorm with weight only.
struct NormWeights {
  TensorView weight;
  TensorView bias;  // empty() for RMSNorm, or a LayerNorm without bias
  NormKind kind = NormKind::LayerNorm;
};

namespace ops {

// y [T,out] = x [T,in] W^T + b, one product (engine/blas.h). Not in place.
void linear(ConstMatrixRef x, const Linear& layer, MatrixRef y);

// y = act(x W^T + b): the bias and the activation run on each block of y as soon as
// the product has written it, by the thread that wrote it.
void linear(ConstMatrixRef x, const Linear& layer, Activation activation, MatrixRef y);

// c [m,n] = alpha * a [m,k] b^T + beta * c, with b given as [n,k] (q k^T in attention).
// Strided views are fine (one head's columns).
void matmul_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha = 1.0f,
               float beta = 0.0f);

// c [m,n] = alpha * a [m,k] b [k,n] + beta * c (probabilities x values in attention).
void matmul_nn(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha = 1.0f,
               float beta = 0.0f);

// Row-wise (x - mean) / sqrt(var + eps) * weight + bias; biased variance as PyTorch.
// In place allowed.
void layer_norm(ConstMatrixRef x, const NormWeights& norm, float eps, MatrixRef y);

// Row-wise x / sqrt(mean(x^2) + eps) * weight (Zhang & Sennrich; LLaMA's RMSNorm). In
// place allowed. Throws Error if a bias is given: RMSNorm has none.
void rms_norm(ConstMatrixRef x, const NormWeights& norm, float eps, MatrixRef y);

// layer_norm or rms_norm, as norm.kind says.
void normalize(ConstMatrixRef x, const NormWeights& norm, float eps, MatrixRef y);

// Row-wise softmax, in place, max-subtracted. A row whose entries are all -inf
// (every key masked) becomes all zeros rather than NaN.
void softmax_rows(MatrixRef x);

// Row-wise log-softmax, in place, computed as x - max - log(sum(exp(x - max))).
void log_softmax_rows(MatrixRef x);

// Elementwise, in place: relu max(0,x); gelu x*Phi(x) (the erf form, not tanh);
// silu x*sigmoid(x).
void activate(Activation activation, MatrixRef x);

// y += x, same shapes.
void add(MatrixRef y, ConstMatrixRef x);

// y *= x elementwise, same shapes (the gate of a gated feed-forward).
void multiply(MatrixRef y, ConstMatrixRef x);

// y *= factor.
void scale(MatrixRef y, float factor);

// Row r of y = row ids[r] of table [V, d]; an id outside [0, V) throws Error naming the
// id, its position and V.
void gather_rows(const WeightMatrix& table, std::span<const int> ids, MatrixRef y);

// y += row-broadcast bias [cols].
void add_row_vector(MatrixRef y, std::span<const float> bias);

}  // namespace ops
}  // namespace ordo
