// How much memory a request may take, checked before a decode allocates its buffers:
// flags allow sizes memory does not (beam 1024 x max length 4092 is 8.7 GB, mostly KV cache,
// for the 1.4 MB showcase model), and std::bad_alloc halfway through says nothing a user
// can act on.
#pragma once

#include <cstdint>
#include <string>

namespace ordo {

struct MemoryBudget {
  std::uint64_t bytes = 0;  // what the process may still take
  std::string limit;        // what sets it, for messages
};

// The smaller of the memory the system has available (MemAvailable in /proc/meminfo,
// else free physical pages from sysconf) and, when an address-space limit is set
// (ulimit -v), what is left under it.
MemoryBudget memory_budget();

// "3.1 GB", "420 MB": one decimal, powers of 10 as memory is sold and top shows it.
std::string format_bytes(std::uint64_t bytes);

// Throws Error "<what> needs <N GB> (<detail>), more than <budget> (<limit>)" with `hint`
// when `needed` exceeds memory_budget().
void check_memory(const std::string& what, std::uint64_t needed, const std::string& detail, const std::string& hint);

}  // namespace ordo
