#include "engine/memory_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "engine/error.h"

namespace ordo {

namespace {

// MemAvailable (kB) from /proc/meminfo: the kernel's estimate of what can be allocated
// without swapping; 0 when unreadable.
std::uint64_t mem_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kilobytes = 0;
  std::string unit;
  while (meminfo >> key >> kilobytes >> unit)
    if (key == "MemAvailable:") return kilobytes * 1024;
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

// The address space this process already maps (the first field of /proc/self/statm).
std::uint64_t address_space_used() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages = 0;
  statm >> pages;
  const long page = sysconf(_SC_PAGESIZE);
  return pages * static_cast<std::uint64_t>(page > 0 ? page : 4096);
}

}  // namespace

MemoryBudget memory_budget() {
  MemoryBudget budget{std::numeric_limits<std::uint64_t>::max(), "no limit known"};
  if (const std::uint64_t available = mem_available(); available > 0)
    budget = {available, "the memory available (MemAvailable)"};
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const std::uint64_t cap = static_cast<std::uint64_t>(limit.rlim_cur);
    const std::uint64_t used = address_space_used();
    const std::uint64_t left = cap > used ? cap - used : 0;
    if (left < budget.bytes) budget = {left, "what is left under the address-space limit (ulimit -v)"};
  }
  return budget;
}

std::string format_bytes(std::uint64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1e9)
    std::snprintf(text, sizeof text, "%.1f GB", b / 1e9);
  else
    std::snprintf(text, sizeof text, "%.0f MB", std::max(1.0, b / 1e6));
  return text;
}

void check_memory(const std::string& what, std::uint64_t needed, const std::string& detail, const std::string& hint) {
  const MemoryBudget budget = memory_budget();
  if (needed <= budget.bytes) return;
  throw Error(what, "needs " + format_bytes(needed) + " (" + detail + "), more than the " +
                        format_bytes(budget.bytes) + " of " + budget.limit,
              hint);
}

}  // namespace ordo
