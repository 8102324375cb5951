// libFuzzer target: input text, any bytes, through the shipped SentencePiece model
// (weights/tokenizer.model, shared by every toy model). Invalid UTF-8, blank text and
// control characters must be refused with ordo::Error or tokenized; ids that encode()
// returns must decode and map to pieces without an error (they are in the vocabulary).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ordo::Tokenizer tokenizer = ordo::Tokenizer::load(ORDO_SOURCE_DIR "/weights/tokenizer.model");
  std::vector<int> ids;
  ordo::fuzz::refusal_is_fine([&] { ids = tokenizer.encode(ordo::fuzz::as_text(data, size)); });
  // Outside refusal_is_fine: encode()'s own ids must be accepted.
  (void)tokenizer.decode(ids);
  (void)tokenizer.pieces(ids);
  return 0;
}
