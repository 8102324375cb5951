// RoPE scaling: how a RoPE model is run past the length it was trained on, by changing
// its rotation frequencies (and, for YaRN, the size of q and k). The four published
// methods, with the semantics of Hugging Face transformers' modeling_rope_utils.py:
//
//   linear  (Chen et al. 2023, position interpolation): every frequency / factor.
//   dynamic (NTK-aware, /u/bloc97 and /u/emozilla): while a sequence is at most
//           max_position_embeddings long, plain RoPE; beyond, the base becomes
//           theta * (factor * L / max - (factor - 1))^(d / (d - 2)) for length L.
//   yarn    (Peng et al. 2023): per frequency, a ramp between the plain one (many
//           rotations within original_max_position_embeddings, index <= low) and the
//           interpolated one / factor (few rotations, index >= high); low and high
//           from beta_fast and beta_slow rotations; q and k both multiplied by the
//           attention factor (default 0.1 ln(factor) + 1), so scores by its square.
//   llama3  (Llama 3.1): wavelengths 2 pi / w shorter than original /
//           high_freq_factor keep w, longer than original / low_freq_factor get
//           w / factor, those between a smooth mix.
//
// Dynamic scaling depends on the sequence length L, and here ordo follows transformers'
// LLaMA with its KV cache: L is the last position a forward pass computes, plus one.
// A prompt read in one pass is rotated with the base of its own length; each generated
// token with the base of the sequence as long as it then is; keys already cached keep
// the rotation they were computed with (transformers does not recompute them either).
// So a sequence that crosses max_position_embeddings mid-generation continues with a
// base that grows step by step, over keys rotated with the bases of their own steps;
// scoring a text in one pass rotates every token with the base of the whole text.
// Unlike transformers, L is each sequence's own (transformers takes the longest of a
// batch), so a batch gives what its sequences give one at a time.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "engine/tensor.h"

namespace ordo {

enum class RopeScalingType { None, Linear, Dynamic, Yarn, Llama3 };

std::string_view rope_scaling_type_name(RopeScalingType type);

struct RopeScaling {
  RopeScalingType type = RopeScalingType::None;
  double factor = 1.0;  // every type: > 0 and finite
  // yarn and llama3: the length the model was trained on. yarn: 0 = max_position_embeddings.
  Index original_max_position_embeddings = 0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3; > low_freq_factor
  double beta_fast = 32.0;        // yarn: rotations where the ramp starts (plain frequencies)
  double beta_slow = 1.0;         // yarn: rotations where it ends (interpolated frequencies)
  std::optional<double> attention_factor;  // yarn: unset = 0.1 ln(factor) + 1 (1 for factor <= 1)
  bool truncate = true;  // yarn: the ramp's ends rounded outwards to whole dimensions

  bool enabled() const { return type != RopeScalingType::None; }
};

// The inverse frequencies [head_dim / 2] and the factor q and k are multiplied by, for
// a sequence of `sequence_length` positions (only dynamic scaling reads it), in double.
struct RopeFrequencies {
  std::vector<double> inverse;
  double attention_factor = 1.0;
};

// Throws Error naming the parameter when the scaling cannot be computed for this head
// width (dynamic scaling needs head_dim > 2: its exponent is d / (d - 2)).
RopeFrequencies rope_frequencies(Index head_dim, double theta, const RopeScaling& scaling,
                                 Index max_position_embeddings, Index sequence_length);

// Dynamic scaling's base for a sequence of `sequence_length` positions: theta itself up
// to max_position_embeddings.
double dynamic_rope_base(Index head_dim, double theta, double factor, Index max_position_embeddings,
                         Index sequence_length);

}  // namespace ordo
