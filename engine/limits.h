// The longest source or target ordo runs, whatever the positions would allow:
// attention scores are [T, T] per head (4096^2 floats = 64 MB), and anything longer is a
// mistake in the input more often than a sentence. The one place the limit lives.
#pragma once

#include "engine/tensor.h"

namespace ordo {

inline constexpr Index kMaxSequenceLength = 4096;

// Throws Error "<where>: <what> of N tokens is more than ordo's limit of 4096 (<hint>)"
// when length > kMaxSequenceLength.
void check_sequence_length(const char* where, const char* what, Index length, const char* hint);

}  // namespace ordo
