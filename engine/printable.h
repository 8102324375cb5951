// Text that came from a file (a tensor name, a config string, a tokenizer piece, a
// shard name) as it may appear in an error, a warning or `ordo inspect`: it must not
// forge a second line on stderr or drive the terminal (a tensor named
// "x\nordo: fake line\x1b[2K" did both). The one escaping function for such text.
#pragma once

#include <string>
#include <string_view>

namespace ordo {

// Valid UTF-8 is kept as is, except: \n, \r, \t and the backslash become \n, \r, \t,
// \\; every other control character (U+0000-U+001F, U+007F) becomes \xHH and a C1
// control (U+0080-U+009F) \u00HH; each byte that is not part of valid UTF-8 (RFC 3629:
// no overlong forms, surrogates or code points past U+10FFFF) becomes \xHH.
std::string printable(std::string_view text);

}  // namespace ordo
