#include "tools/cli/openblas_workers.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <string_view>

namespace ordo::tools {

namespace {

bool limited(int resource) {
  rlimit limit{};
  return getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
}

}  // namespace

void restart_without_openblas_workers(char** argv) {
  const char* threads = std::getenv("OPENBLAS_NUM_THREADS");
  if (threads != nullptr && std::string_view(threads) == "1") return;
  if (!limited(RLIMIT_AS) && !limited(RLIMIT_DATA)) return;
  // Started through the dynamic loader (ld-linux-x86-64.so.2 ./ordo ...), this process's
  // program is the loader, which would take argv[0] for its own first argument.
  std::error_code error;
  if (std::filesystem::read_symlink("/proc/self/exe", error).filename().string().starts_with("ld-")) return;
  if (::setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) return;
  ::execv("/proc/self/exe", argv);  // returns only when it fails: then on as we are
}

}  // namespace ordo::tools
