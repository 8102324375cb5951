// max_input_tokens, as TranslatorOptions and GeneratorOptions share it (internal.h).
#include <string>

#include "engine/error.h"
#include "models/api/internal.h"

namespace ordo::detail {

void check_max_input_tokens(Index max_input_tokens) {
  if (max_input_tokens < 0 || max_input_tokens == 1)
    throw OptionError("max_input_tokens", "must be 0 (the model's limit) or at least 2 (a token and the eos or bos "
                                          "ordo adds), got " + std::to_string(max_input_tokens));
}

void check_max_input_tokens(Index max_input_tokens, Index model_limit, const std::string& what) {
  if (max_input_tokens > model_limit)
    throw OptionError("max_input_tokens", std::to_string(max_input_tokens) + " is more than this model reads: " +
                                              std::to_string(model_limit) + " tokens per " + what +
                                              " (0: that limit)");
}

}  // namespace ordo::detail
