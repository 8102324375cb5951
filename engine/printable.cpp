#include "engine/printable.h"

#include <cstdint>
#include <cstdio>

namespace ordo {

namespace {

// The length of the valid UTF-8 sequence at text[at], or 0 when that byte starts none.
std::size_t utf8_length(std::string_view text, std::size_t at, std::uint32_t& code_point) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char first = byte(at);
  std::size_t length = 0;
  std::uint32_t lowest = 0;
  if (first < 0x80) {
    code_point = first;
    return 1;
  } else if (first >= 0xc2 && first <= 0xdf) {
    length = 2, code_point = first & 0x1fu, lowest = 0x80;
  } else if (first >= 0xe0 && first <= 0xef) {
    length = 3, code_point = first & 0x0fu, lowest = 0x800;
  } else if (first >= 0xf0 && first <= 0xf4) {
    length = 4, code_point = first & 0x07u, lowest = 0x10000;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0u) != 0x80u) return 0;
    code_point = (code_point << 6) | (byte(at + i) & 0x3fu);
  }
  if (code_point < lowest || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff)) return 0;
  return length;
}

void append_hex(std::string& out, const char* format, unsigned value) {
  char text[8];
  std::snprintf(text, sizeof text, format, value);
  out += text;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    std::uint32_t code_point = 0;
    const std::size_t length = utf8_length(text, at, code_point);
    if (length == 0) {  // not UTF-8: the byte itself
      append_hex(out, "\\x%02x", static_cast<unsigned char>(text[at]));
      ++at;
      continue;
    }
    if (code_point == '\n') out += "\\n";
    else if (code_point == '\r') out += "\\r";
    else if (code_point == '\t') out += "\\t";
    else if (code_point == '\\') out += "\\\\";
    else if (code_point < 0x20 || code_point == 0x7f) append_hex(out, "\\x%02x", code_point);
    else if (code_point >= 0x80 && code_point <= 0x9f) append_hex(out, "\\u%04x", code_point);
    else out.append(text.substr(at, length));
    at += length;
  }
  return out;
}

}  // namespace ordo
