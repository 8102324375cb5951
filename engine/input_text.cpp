#include "engine/input_text.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "engine/error.h"

namespace ordo {

namespace {

// One decoded character: its code point and its length in bytes (0: the bytes at this
// offset break UTF-8).
struct Character {
  char32_t code = 0;
  std::size_t length = 0;
};

// RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF.
Character decode_at(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  char32_t code = 0;
  if (c < 0x80) return {c, 1};
  if (c >= 0xC2 && c <= 0xDF) length = 2, code = c & 0x1F;
  else if (c == 0xE0) length = 3, low = 0xA0, code = c & 0x0F;
  else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) length = 3, code = c & 0x0F;
  else if (c == 0xED) length = 3, high = 0x9F, code = c & 0x0F;
  else if (c == 0xF0) length = 4, low = 0x90, code = c & 0x07;
  else if (c >= 0xF1 && c <= 0xF3) length = 4, code = c & 0x07;
  else if (c == 0xF4) length = 4, high = 0x8F, code = c & 0x07;
  else return {};
  if (i + length > text.size()) return {};
  for (std::size_t k = 1; k < length; ++k) {
    const unsigned char next = byte(i + k);
    if (k == 1 ? (next < low || next > high) : (next < 0x80 || next > 0xBF)) return {};
    code = (code << 6) | (next & 0x3F);
  }
  return {code, length};
}

bool is_control(char32_t code) { return (code < 0x20 && code != U'\t') || (code >= 0x7F && code <= 0x9F); }

bool is_space(char32_t code) {
  return code == U' ' || code == U'\t' || code == 0xA0 || code == 0x1680 || (code >= 0x2000 && code <= 0x200A) ||
         code == 0x2028 || code == 0x2029 || code == 0x202F || code == 0x205F || code == 0x3000;
}

std::string describe_control(char32_t code) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "%04X", static_cast<unsigned>(code));
  std::string name;
  switch (code) {
    case 0x00: name = " (NUL)"; break;
    case 0x0A: name = " (line feed)"; break;
    case 0x0D: name = " (carriage return)"; break;
    case 0x1B: name = " (escape)"; break;
    case 0x7F: name = " (delete)"; break;
    default: break;
  }
  return "U+" + std::string(hex) + name;
}

bool is_ascii_space(char c) { return c == ' ' || c == '\t'; }

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

void check_input_text(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const Character c = decode_at(text, i);
    if (c.length == 0)
      throw Error("input text", "is not valid UTF-8 (byte " + std::to_string(i) + ")",
                  "convert the input to UTF-8, e.g. with iconv");
    if (is_control(c.code))
      throw Error("input text", "has the control character " + describe_control(c.code) + " at byte " + std::to_string(i),
                  "ordo reads one line of text without control characters, tab excepted: remove them");
    i += c.length;
  }
}

std::string escape_control_characters(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Character c = decode_at(text, i);
    if (c.length == 0) {
      escaped += text[i++];
      continue;
    }
    if (c.code == U'\\') {
      escaped += "\\\\";
    } else if (c.code == U'\n') {
      escaped += "\\n";
    } else if (c.code == U'\r') {
      escaped += "\\r";
    } else if (is_control(c.code)) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(c.code));
      escaped += hex;
    } else {
      escaped.append(text.substr(i, c.length));
    }
    i += c.length;
  }
  return escaped;
}

bool is_blank(std::string_view text) noexcept {
  for (std::size_t i = 0; i < text.size();) {
    const Character c = decode_at(text, i);
    if (c.length == 0 || !is_space(c.code)) return false;
    i += c.length;
  }
  return true;
}

std::size_t cut_before(std::string_view text, std::size_t at, bool& cut_is_inside_word) {
  if (at >= text.size()) {
    cut_is_inside_word = false;
    return text.size();
  }
  for (std::size_t i = at + 1; i-- > 0;)
    if (is_ascii_space(text[i])) {
      cut_is_inside_word = false;
      return i;
    }
  cut_is_inside_word = true;
  std::size_t i = at;
  while (i > 0 && is_continuation(text[i])) --i;
  return i;
}

std::size_t cut_after(std::string_view text, std::size_t at, bool& cut_is_inside_word) {
  if (at == 0) {
    cut_is_inside_word = false;
    return 0;
  }
  for (std::size_t i = at; i < text.size(); ++i)
    if (is_ascii_space(text[i])) {
      cut_is_inside_word = false;
      return i;
    }
  cut_is_inside_word = true;
  std::size_t i = std::min(at, text.size());
  while (i < text.size() && is_continuation(text[i])) ++i;
  return i;
}

}  // namespace ordo
