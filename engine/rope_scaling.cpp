#include "engine/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "engine/error.h"

namespace ordo {

namespace {

// theta^(-2i/d), i in [0, d/2): plain RoPE.
std::vector<double> plain_frequencies(Index head_dim, double theta) {
  std::vector<double> inverse(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < inverse.size(); ++i)
    inverse[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  return inverse;
}

// YaRN: the (fractional) dimension index at which a frequency makes `rotations` turns
// over `length` positions: d ln(length / (2 pi rotations)) / (2 ln theta).
double yarn_dimension(double rotations, Index head_dim, double theta, double length) {
  return static_cast<double>(head_dim) * std::log(length / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(theta));
}

void apply_yarn(std::vector<double>& inverse, Index head_dim, double theta, const RopeScaling& s,
                Index max_position_embeddings) {
  const double original = static_cast<double>(
      s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings : max_position_embeddings);
  double low = yarn_dimension(s.beta_fast, head_dim, theta, original);
  double high = yarn_dimension(s.beta_slow, head_dim, theta, original);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(head_dim - 1));
  if (low == high) high += 0.001;  // as transformers: a step instead of a division by 0
  for (std::size_t i = 0; i < inverse.size(); ++i) {
    // ramp 0: the plain frequency (extrapolation); 1: divided by factor (interpolation).
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    inverse[i] = inverse[i] / s.factor * ramp + inverse[i] * (1.0 - ramp);
  }
}

void apply_llama3(std::vector<double>& inverse, const RopeScaling& s) {
  const double original = static_cast<double>(s.original_max_position_embeddings);
  const double low_wavelength = original / s.low_freq_factor;    // longer: w / factor
  const double high_wavelength = original / s.high_freq_factor;  // shorter: w kept
  for (double& w : inverse) {
    const double wavelength = 2.0 * std::numbers::pi / w;
    if (wavelength < high_wavelength) continue;
    if (wavelength > low_wavelength) {
      w /= s.factor;
      continue;
    }
    const double smooth = (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    w = (1.0 - smooth) * w / s.factor + smooth * w;
  }
}

}  // namespace

std::string_view rope_scaling_type_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::None: return "none";
    case RopeScalingType::Linear: return "linear";
    case RopeScalingType::Dynamic: return "dynamic";
    case RopeScalingType::Yarn: return "yarn";
    case RopeScalingType::Llama3: return "llama3";
  }
  return "?";
}

double dynamic_rope_base(Index head_dim, double theta, double factor, Index max_position_embeddings,
                         Index sequence_length) {
  if (sequence_length <= max_position_embeddings) return theta;
  const double d = static_cast<double>(head_dim);
  const double ratio = static_cast<double>(sequence_length) / static_cast<double>(max_position_embeddings);
  return theta * std::pow(factor * ratio - (factor - 1.0), d / (d - 2.0));
}

RopeFrequencies rope_frequencies(Index head_dim, double theta, const RopeScaling& scaling,
                                 Index max_position_embeddings, Index sequence_length) {
  if (scaling.type == RopeScalingType::Dynamic && head_dim <= 2)
    throw Error("rope_scaling", "dynamic scaling needs a head dimension above 2, got " + std::to_string(head_dim),
                "its base exponent is head_dim / (head_dim - 2); use linear or yarn scaling");
  RopeFrequencies out;
  switch (scaling.type) {
    case RopeScalingType::None:
      out.inverse = plain_frequencies(head_dim, theta);
      break;
    case RopeScalingType::Linear:
      out.inverse = plain_frequencies(head_dim, theta);
      for (double& w : out.inverse) w /= scaling.factor;
      break;
    case RopeScalingType::Dynamic:
      out.inverse = plain_frequencies(
          head_dim, dynamic_rope_base(head_dim, theta, scaling.factor, max_position_embeddings, sequence_length));
      break;
    case RopeScalingType::Yarn:
      out.inverse = plain_frequencies(head_dim, theta);
      apply_yarn(out.inverse, head_dim, theta, scaling, max_position_embeddings);
      out.attention_factor = scaling.attention_factor.value_or(
          scaling.factor <= 1.0 ? 1.0 : 0.1 * std::log(scaling.factor) + 1.0);
      break;
    case RopeScalingType::Llama3:
      out.inverse = plain_frequencies(head_dim, theta);
      apply_llama3(out.inverse, scaling);
      break;
  }
  return out;
}

}  // namespace ordo
