// What ordo accepts as input text, in one place: every text a model reads (a source, a
// prompt, a target to score) passes check_input_text before it is tokenized.
//
// The rule: text is UTF-8 (RFC 3629) without control characters. A byte that breaks
// UTF-8, a NUL, or any other control character (U+0000-U+001F, U+007F-U+009F) except
// tab makes the text an error naming the byte offset; tab is a space. No sentence holds
// a control character: they come from binary files, terminal escapes or a wrong
// encoding, and SentencePiece would quietly drop most of them (ESC "[31m" translated as
// "[31m") and read NUL as an unknown word. Refusing says so; any replacement would not.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ordo {

// Throws Error "input text: <what> at byte N (<hint>)" unless `text` follows the rule
// above. Linear in the text, so cheap next to tokenizing it.
void check_input_text(std::string_view text);

// The output side of the rule, for a program that writes one line per text: `text`
// with each control character the rule refuses written as an escape, so that generated
// text (a byte-fallback tokenizer can spell any byte) never breaks or hides a line.
// Line feed and carriage return become \n and \r, every other one \u00XX (JSON's
// spelling, e.g. \u001b for ESC), and a backslash \\, so the escaping can be undone.
// Tab, the one control character the rule reads, stays; bytes that break UTF-8 pass as
// they are (they end no line).
std::string escape_control_characters(std::string_view text);

// The text has nothing to read: it is empty or holds only spaces (ASCII space, tab, and
// the Unicode space separators, e.g. U+00A0 and U+3000). Call on checked text.
bool is_blank(std::string_view text);

// Where a long text may be cut so that tokenizing the part gives the same pieces as
// tokenizing the whole: at a space, since SentencePiece pieces never span one. The
// offset of the last space at or before `at` (the part [0, offset) ends before it),
// or, when the first `at` bytes hold none, the last character boundary at or before
// `at` (inside a word: the pieces near the cut may differ). `cut_is_inside_word` says
// which.
std::size_t cut_before(std::string_view text, std::size_t at, bool& cut_is_inside_word);

// The same from the other end: the offset of the first space at or after `at` (the
// part [offset, end) starts with it), else the first character boundary at or after `at`.
std::size_t cut_after(std::string_view text, std::size_t at, bool& cut_is_inside_word);

}  // namespace ordo
