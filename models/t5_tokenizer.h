// T5's tokenizer description (T5Tokenizer, the t5 and mt5 families): spiece.model, whose
// own ids are the model's ids; a source is its pieces then </s> (no bos); the
// sentinels <extra_id_0..N-1> (tokenizer_config.json's extra_ids, T5Tokenizer's
// default 100 when it does not say) take the ids right after the pieces, counting down
// from the last; vocab_size may be larger still (T5 pads its embedding to a multiple of
// 128: those rows have no token).
#pragma once

#include <filesystem>
#include <memory>

#include "models/config.h"
#include "tokenizer/tokenizer.h"

namespace ordo {

// The tokenizer of a T5 directory, or null when it has no spiece.model (ids only).
// Throws Error naming the file when spiece.model and config.json disagree: more pieces
// and sentinels than vocab_size, or a '</s>' / '<pad>' piece whose id is not the
// config's eos_token_id / pad_token_id (the files are of two models), or when
// tokenizer_config.json's extra_ids is not a non-negative integer.
std::shared_ptr<const Tokenizer> load_t5_tokenizer(const std::filesystem::path& directory, const ModelConfig& config);

}  // namespace ordo
