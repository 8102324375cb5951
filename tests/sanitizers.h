// Whether this test binary runs under AddressSanitizer or ThreadSanitizer. They reserve
// terabytes of address space (so `ulimit -v` cannot apply) and add shadow memory and
// quarantines to every resident set: a memory bound measured on a plain build means
// nothing there, while what the code does still must hold.
#pragma once

namespace ordo::testing_support {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace ordo::testing_support
