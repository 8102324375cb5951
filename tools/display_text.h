// Text from a model (SentencePiece pieces, a vocabulary's strings) shown on a terminal.
#pragma once

#include <string>
#include <string_view>

namespace ordo::tools {

// `text` with its control characters as C escapes (\n, \t, \r, \xNN for the rest of
// 0x00-0x1f and 0x7f) and a backslash doubled, so it stays one visible word on one line
// and cannot move the cursor or recolour the terminal. Other bytes, UTF-8 included,
// are kept.
std::string escape_control(std::string_view text);

}  // namespace ordo::tools
