// Text that came from a file (a tensor name, a config string, a tokenizer piece, a
// shard name) as it may appear in an error, a warning or `ordo inspect`: it must not
// forge a second line on stderr or drive the terminal (a tensor named
// "x\nordo: fake line\x1b[2K" did both). The one escaping function for such text.
#pragma once

#include "ordo/text.hpp"  // printable(), public: the CLI and programs print file text the same way
