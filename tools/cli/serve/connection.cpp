#include "tools/cli/serve/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace ordo::tools::serve {

namespace {

// The address and port of a sockaddr as text ("127.0.0.1", 41234); false for other families.
bool address_of(const sockaddr_storage& address, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    if (!inet_ntop(AF_INET, &in.sin_addr, text, sizeof text)) return false;
    port = ntohs(in.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    if (!inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text)) return false;
    port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  ip = text;
  return true;
}

}  // namespace

ClientWatch::ClientWatch(const std::string& remote_addr, int remote_port, int local_port) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    sockaddr_storage peer{}, local{};
    socklen_t peer_size = sizeof peer, local_size = sizeof local;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) continue;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0) continue;
    std::string peer_ip, local_ip;
    int peer_port = 0, local_port_found = 0;
    if (!address_of(peer, peer_ip, peer_port) || !address_of(local, local_ip, local_port_found)) continue;
    if (peer_ip == remote_addr && peer_port == remote_port && local_port_found == local_port) {
      fd_ = fd;
      return;
    }
  }
}

bool ClientWatch::gone() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR)) return true;
  if (!(p.revents & POLLIN)) return false;
  char byte;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace ordo::tools::serve
