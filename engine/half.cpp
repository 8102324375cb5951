#include "engine/half.h"

namespace ordo {

float half_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN with its payload
  if (exponent != 0) return bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));  // rebias 15 -> 127
  if (mantissa == 0) return bits_to_float(sign);
  // A subnormal m * 2^-24: normalize until the implicit bit (0x400) is set.
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  return bits_to_float(sign | (static_cast<std::uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13));
}

std::uint16_t float_to_half(float value) {
  const std::uint32_t bits = float_to_bits(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: quiet, the payload's top bits kept
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u)  // 65520 and above round to infinity (65504 is the largest half)
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {
    // Below 2^-14, the smallest normal half: a multiple of 2^-24. Adding 0.5, whose ulp
    // is 2^-24, lets the float adder round it (to nearest, ties to even); the low bits
    // are then the half's (0x400 being the smallest normal, correctly).
    const float rounded = bits_to_float(magnitude) + 0.5f;
    return static_cast<std::uint16_t>(sign | (float_to_bits(rounded) - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round 23 mantissa bits to 10, ties to
  // even; a carry into the exponent is the correct next power of two.
  const std::uint32_t odd = (magnitude >> 13) & 1u;
  return static_cast<std::uint16_t>(sign | ((magnitude - 0x38000000u + 0xfffu + odd) >> 13));
}

}  // namespace ordo
