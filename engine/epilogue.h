// What a product does to its output right after writing it, while the block is in cache:
// add a bias, then an activation (a Linear layer's bias and its feed-forward's
// activation). It is data handed down to the product (blas::gemm_nt), which applies it
// to each block of columns it wrote, by calling apply_epilogue below: fusion without a
// callback, so the product reads downward like every other call.
#pragma once

#include <optional>
#include <span>

#include "engine/tensor.h"

namespace ordo {

// ReLU, GELU (erf form), SiLU/swish, and GELU's tanh approximation (Hugging Face's
// gelu_new, T5 v1.1's and some Marian models'). Their config names live in each
// family's config reader (models/config.cpp, models/marian_config.cpp).
enum class Activation { Relu, Gelu, Silu, GeluTanh };

struct Epilogue {
  std::span<const float> bias;           // [n], added to every row; empty: none
  std::optional<Activation> activation;  // after the bias; none: the identity

  bool empty() const { return bias.empty() && !activation; }
};

// Elementwise, in place: relu max(0,x); gelu x*Phi(x) (the erf form, not tanh);
// silu x*sigmoid(x); gelu_tanh 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).
void apply_activation(Activation activation, MatrixRef x);

// The epilogue on `block`, the columns [first, first + block.cols()) of the product's
// output: bias[first + c] added to column c, then the activation.
void apply_epilogue(const Epilogue& epilogue, MatrixRef block, Index first);

}  // namespace ordo
