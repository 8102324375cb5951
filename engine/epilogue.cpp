#include "engine/epilogue.h"

#include <cmath>
#include <numbers>

namespace ordo {

namespace {

constexpr float kInvSqrt2 = static_cast<float>(1.0 / std::numbers::sqrt2);
constexpr float kSqrt2OverPi = static_cast<float>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);  // sqrt(2/pi)

}  // namespace

void apply_activation(Activation activation, MatrixRef x) {
  const Index n = x.cols();
  for (Index r = 0; r < x.rows(); ++r) {
    float* row = x.data() + r * x.stride();
    switch (activation) {
      case Activation::Relu:
        // Written so that NaN stays NaN, as in PyTorch: broken weights must reach the
        // logits check, not turn into zeros (x > 0 ? x : 0 would hide them).
        for (Index j = 0; j < n; ++j) row[j] = row[j] < 0.0f ? 0.0f : row[j];
        break;
      case Activation::Gelu:
        // x * Phi(x) = 0.5 x (1 + erf(x/sqrt2)) = 0.5 x erfc(-x/sqrt2). The erfc form is
        // the same function without the cancellation in 1 + erf for x << 0.
        for (Index j = 0; j < n; ++j) row[j] = 0.5f * row[j] * std::erfc(-row[j] * kInvSqrt2);
        break;
      case Activation::Silu:
        for (Index j = 0; j < n; ++j) row[j] = row[j] / (1.0f + std::exp(-row[j]));
        break;
      case Activation::GeluTanh:
        // Hugging Face's NewGELUActivation (gelu_new), as Hendrycks & Gimpel approximate it.
        for (Index j = 0; j < n; ++j) {
          const float v = row[j];
          row[j] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
        }
        break;
    }
  }
}

void apply_epilogue(const Epilogue& epilogue, MatrixRef block, Index first) {
  if (!epilogue.bias.empty()) {
    const float* bias = epilogue.bias.data() + first;
    for (Index r = 0; r < block.rows(); ++r) {
      float* out = block.data() + r * block.stride();
      for (Index j = 0; j < block.cols(); ++j) out[j] += bias[j];
    }
  }
  if (epilogue.activation) apply_activation(*epilogue.activation, block);
}

}  // namespace ordo
