// Checks of the limits every request is held to. The limits themselves are public
// (kMaxSequenceLength, kMaxBatchSize in ordo/options.hpp): a program sees the numbers the
// engine enforces.
#pragma once

#include "engine/tensor.h"
#include "ordo/options.hpp"

namespace ordo {

// Throws OptionError("batch_size") unless 1 <= batch_size <= kMaxBatchSize.
void check_batch_size(Index batch_size);

// Throws Error "<where>: <what> of N tokens is more than ordo's limit of 4096 (<hint>)"
// when length > kMaxSequenceLength.
void check_sequence_length(const char* where, const char* what, Index length, const char* hint);

}  // namespace ordo
