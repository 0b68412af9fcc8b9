#include "graph/crash_isolation.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace amp {

std::string rehearse_in_child(const std::function<void()>& work, int timeout_seconds) {
  // The child holds the write end of a pipe: it closes when the child ends in any way, which
  // wakes the parent's poll() at once.
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return "";
  std::fflush(nullptr);  // buffered output must not be written twice
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(ends[0]);
    ::close(ends[1]);
    return "";
  }
  if (pid == 0) {
    ::close(ends[0]);
    // An expected crash: no core file, and no crash handler of the parent's (a fuzzer, a
    // sanitizer) reporting it as the parent's own.
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    try {
      work();
    } catch (...) {
    }
    ::_exit(0);
  }
  ::close(ends[1]);
  struct pollfd closed = {ends[0], POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&closed, 1, timeout_seconds * 1000);
  } while (ready < 0 && errno == EINTR);
  ::close(ends[0]);
  int status = 0;
  if (ready == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return "did not finish within " + std::to_string(timeout_seconds) + " s";
  }
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return "";
  if (WIFSIGNALED(status)) return std::string("crashed with signal ") + ::strsignal(WTERMSIG(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)  // a sanitizer's report ends the child this way
    return "failed with exit code " + std::to_string(WEXITSTATUS(status));
  return "";
}

}  // namespace amp
