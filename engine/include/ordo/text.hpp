// The text rules every front end of ordo shares (the CLI, a program, a server): what a
// model accepts as input text, and how text goes out so that one input line always
// gives one output line and nothing read from a file can drive a terminal.
#pragma once

#include <string>
#include <string_view>

#include "ordo/export.hpp"

namespace ordo {

// The input rule: text is UTF-8 (RFC 3629) without control characters. A byte that
// breaks UTF-8, a NUL, or any other control character (U+0000-U+001F, U+007F-U+009F)
// except tab makes the text an error naming the byte offset; tab is a space. Every text
// a model reads (a source, a prompt, a target to score) is checked before it is
// tokenized. Throws ordo::Error "input text: <what> at byte N (<hint>)" unless `text`
// follows the rule. Linear in the text.
ORDO_API void check_input_text(std::string_view text);

// The text has nothing to read: it is empty or holds only spaces (ASCII space, tab, and
// the Unicode space separators, e.g. U+00A0 and U+3000). Call on checked text. Throws
// nothing.
ORDO_API bool is_blank(std::string_view text) noexcept;

// The output side of the rule, for a program that writes one line per text: `text`
// with each control character the rule refuses written as an escape, so that generated
// text (a byte-fallback tokenizer can spell any byte) never breaks or hides a line.
// Line feed and carriage return become \n and \r, every other one \u00XX (JSON's
// spelling, e.g. \u001b for ESC), and a backslash \\, so the escaping can be undone.
// Tab, the one control character the rule reads, stays; bytes that break UTF-8 pass as
// they are (they end no line).
ORDO_API std::string escape_control_characters(std::string_view text);

// Text that came from a file (a tensor name, a config string, a tokenizer piece) as it
// may appear in an error, a warning or a listing: valid UTF-8 is kept, except that \n,
// \r, \t and the backslash become \n, \r, \t, \\; every other control character
// (U+0000-U+001F, U+007F) becomes \xHH and a C1 control (U+0080-U+009F) \u00HH; each
// byte that is not part of valid UTF-8 becomes \xHH. So no such text can forge a second
// line on stderr or write a raw ESC to the terminal.
ORDO_API std::string printable(std::string_view text);

}  // namespace ordo
