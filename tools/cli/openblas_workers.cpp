#include "tools/cli/openblas_workers.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
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
  if (::setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) return;
  ::execv("/proc/self/exe", argv);  // returns only when it fails: then on as we are
}

}  // namespace ordo::tools
