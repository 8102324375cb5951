// ORDO_API marks what libordo.so exports: the public API and nothing else. The library
// is compiled with hidden visibility, so the engine's own symbols stay inside it and a
// program sees only what these headers declare.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define ORDO_API __attribute__((visibility("default")))
#else
#define ORDO_API
#endif
