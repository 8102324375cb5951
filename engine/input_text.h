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

#include "ordo/text.hpp"  // check_input_text, is_blank, escape_control_characters: the rule's public part

namespace ordo {

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
