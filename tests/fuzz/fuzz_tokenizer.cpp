// libFuzzer target: input text, any bytes, through the shipped SentencePiece model
// (weights/tokenizer.model, shared by every toy model). Text that breaks the input rule
// (invalid UTF-8, control characters), blank text and the like must be refused with
// ordo::Error or tokenized; ids that encode() returns must decode and map to pieces
// without an error. encode_bounded() must keep its promise for every bound and end:
// the first or last max_ids ids of encode(), `more` exactly when there were more, and
// a refusal exactly when encode() refuses.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "tokenizer/tokenizer.h"

namespace {

void check_bounded(const ordo::Tokenizer& tokenizer, std::string_view text, const std::optional<std::vector<int>>& all,
                   ordo::Index max_ids, ordo::Tokenizer::Keep keep) {
  std::optional<ordo::Tokenizer::Bounded> bounded;
  ordo::fuzz::refusal_is_fine([&] { bounded = tokenizer.encode_bounded(text, max_ids, keep); });
  if (bounded.has_value() != all.has_value()) {
    std::fprintf(stderr, "encode_bounded(max_ids %lld) %s where encode() %s\n", static_cast<long long>(max_ids),
                 bounded ? "accepts" : "refuses", all ? "accepts" : "refuses");
    __builtin_trap();
  }
  if (!all) return;
  const std::size_t n = std::min(all->size(), static_cast<std::size_t>(max_ids));
  const std::vector<int> want = keep == ordo::Tokenizer::Keep::Start ? std::vector<int>(all->begin(), all->begin() + n)
                                                                     : std::vector<int>(all->end() - n, all->end());
  if (bounded->ids != want || bounded->more != (all->size() > static_cast<std::size_t>(max_ids))) {
    std::fprintf(stderr, "encode_bounded(max_ids %lld, %s) is not the %s of encode()'s %zu ids\n",
                 static_cast<long long>(max_ids), keep == ordo::Tokenizer::Keep::Start ? "Start" : "End",
                 keep == ordo::Tokenizer::Keep::Start ? "start" : "end", all->size());
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ordo::Tokenizer tokenizer = ordo::Tokenizer::load(ORDO_SOURCE_DIR "/weights/tokenizer.model");
  const std::string_view text = ordo::fuzz::as_text(data, size);
  std::optional<std::vector<int>> ids;
  ordo::fuzz::refusal_is_fine([&] { ids = tokenizer.encode(text); });
  if (ids) {
    // Outside refusal_is_fine: encode()'s own ids must be accepted.
    (void)tokenizer.decode(*ids);
    (void)tokenizer.pieces(*ids);
  }
  for (const ordo::Index max_ids : {1, 3, 8})
    for (const auto keep : {ordo::Tokenizer::Keep::Start, ordo::Tokenizer::Keep::End})
      check_bounded(tokenizer, text, ids, max_ids, keep);
  return 0;
}
