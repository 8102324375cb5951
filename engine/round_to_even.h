// Rounding to the nearest integer, halves to even, written so that compilers vectorize
// it: the activations' quantization (engine/integer_product.cpp) and the weights'
// (models/quantize.cpp) both round this way.
#pragma once

namespace ordo {

// v rounded to the nearest integer, halves to even, for |v| < 2^22: adding 1.5 * 2^23
// leaves no fraction bits, so the float addition rounds as std::nearbyint and the
// hardware's conversion (cvtps2dq) do in their default mode (1.5 * 2^23 is even). Exact,
// portable and vectorizable, where std::nearbyint is a library call below SSE4.1.
inline float round_to_even(float v) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
  return (v + kShift) - kShift;
}

}  // namespace ordo
