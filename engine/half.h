// IEEE half (F16) and bfloat16 (BF16) to and from float32, bit-exact and portable: the
// loader, the quantizer and the portable kernels convert with these; the AVX2 kernels
// use F16C, which rounds the same way (to nearest, ties to even).
#pragma once

#include <cstdint>
#include <cstring>

namespace ordo {

inline float bits_to_float(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline std::uint32_t float_to_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Exact: every half is a float.
float half_to_float(std::uint16_t half);

// Rounded to nearest, ties to even; beyond the half range: infinity; NaN stays NaN.
std::uint16_t float_to_half(float value);

inline float bfloat16_to_float(std::uint16_t bf16) { return bits_to_float(static_cast<std::uint32_t>(bf16) << 16); }

// Rounded to nearest, ties to even (as PyTorch's .to(torch.bfloat16)); NaN stays NaN.
inline std::uint16_t float_to_bfloat16(float value) {
  const std::uint32_t bits = float_to_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

}  // namespace ordo
