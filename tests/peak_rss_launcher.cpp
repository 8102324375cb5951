// peak_rss_launcher OUT PROGRAM [ARGS...]: runs PROGRAM (fork and exec; stdin, stdout and
// stderr shared), waits for it, writes its peak resident set in KB to the file OUT, and
// exits with its exit code (128 + the signal when one killed it).
//
// Why a launcher: at exec, Linux folds the old address space's high-water mark into the
// process's ru_maxrss. A program posix_spawn'ed by the test binary (vfork: the test's own
// address space until exec) therefore reports the test's peak, hundreds of MB once other
// tests have run; forked from this small launcher it reports its own. The launcher's
// child dies with it (PR_SET_PDEATHSIG), so a test that kills the launcher leaves nothing.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: peak_rss_launcher OUT PROGRAM [ARGS...]\n");
    return 2;
  }
  const pid_t child = ::fork();
  if (child < 0) return 2;
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::execv(argv[2], argv + 2);
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  if (::wait4(child, &status, 0, &usage) != child) return 2;
  if (std::FILE* out = std::fopen(argv[1], "w")) {
    std::fprintf(out, "%ld\n", usage.ru_maxrss);
    std::fclose(out);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
