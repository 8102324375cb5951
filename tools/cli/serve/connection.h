// Whether an HTTP client is still there. cpp-httplib (0.11, Debian 12) gives a handler
// its request but not the connection's socket, so ClientWatch finds the socket by the
// connection's addresses (the local and remote address and port the request carries)
// among the process's open descriptors, once per request, and later asks the kernel
// whether the peer closed it. The socket stays open, and so ours, until the handler
// returns: httplib closes it only then.
#pragma once

#include <string>

namespace ordo::tools::serve {

class ClientWatch {
 public:
  // The connection of a request from remote_addr:remote_port to local_port. When its
  // socket is not found (an address form not handled), gone() is always false.
  ClientWatch(const std::string& remote_addr, int remote_port, int local_port);

  // True when the client closed its end (or the connection broke). A client that has
  // only shut down writing (HTTP/1.0 style) counts as gone too. Thread-safe; one poll
  // and, when readable, one recv(MSG_PEEK) per call.
  bool gone() const;

 private:
  int fd_ = -1;
};

}  // namespace ordo::tools::serve
