// Peer liveness over TCP (see peer_liveness.hpp).

#include "runtime/peer_liveness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace mpiaccel::detail {
namespace {

constexpr size_t kHostBytes = 256;
constexpr auto kProbeTime = std::chrono::seconds(2);

struct Peer {
  std::string host;
  int port = 0;  // 0: it had no port to offer
};

// The process's table, set once at start (before any failure can ask).
std::mutex table_mutex;
std::vector<Peer> table;
int own_rank = -1;

// A listening socket on a free port of every address; 0 if none could be made.
int open_port(int* fd_out) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return 0;
  }
  *fd_out = fd;
  return ntohs(address.sin_port);
}

// A probe connecting to `peer`'s port, or -1 when its host does not resolve.
int start_probe(const Peer& peer) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(peer.host.c_str(), std::to_string(peer.port).c_str(), &hints, &found) != 0 || !found)
    return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
    // Refused at once: nobody listens there any more. Keep the socket so the
    // poll below sees the error.
  }
  ::freeaddrinfo(found);
  return fd;
}

// Whether the probe on `fd` connected (after poll said it finished).
bool connected(int fd) {
  int error = 0;
  socklen_t length = sizeof(error);
  return ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
}

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(ranks[i]) +
            (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return text;
}

}  // namespace

void start_peer_liveness(MPI_Comm world, int rank, const std::string& host) {
  int fd = -1;
  const int port = open_port(&fd);
  if (fd >= 0)
    std::thread([fd] {
      for (;;) {
        const int client = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (client >= 0) ::close(client);
        else if (errno != EINTR && errno != ECONNABORTED) return;
      }
    }).detach();
  struct Record {
    char host[kHostBytes];
    int port;
  } mine{};
  std::strncpy(mine.host, host.c_str(), kHostBytes - 1);
  mine.port = port;
  int size = 1;
  MPI_Comm_size(world, &size);
  std::vector<Record> all(static_cast<size_t>(size));
  if (MPI_Allgather(&mine, sizeof(Record), MPI_BYTE, all.data(), sizeof(Record), MPI_BYTE, world) !=
      MPI_SUCCESS)
    return;  // no table: describe_lost_peers says nothing
  std::lock_guard<std::mutex> lock(table_mutex);
  table.clear();
  for (const Record& r : all) table.push_back({std::string(r.host, strnlen(r.host, kHostBytes)), r.port});
  own_rank = rank;
}

std::string describe_lost_peers() noexcept {
  try {
    std::vector<Peer> peers;
    int me = -1;
    {
      std::lock_guard<std::mutex> lock(table_mutex);
      peers = table;
      me = own_rank;
    }
    if (peers.size() < 2) return "";
    std::vector<pollfd> probes;
    std::vector<int> rank_of;
    for (int r = 0; r < static_cast<int>(peers.size()); ++r) {
      if (r == me || peers[static_cast<size_t>(r)].port == 0) continue;
      const int fd = start_probe(peers[static_cast<size_t>(r)]);
      if (fd < 0) continue;
      probes.push_back({fd, POLLOUT, 0});
      rank_of.push_back(r);
    }
    std::vector<char> answered(probes.size(), 0), finished(probes.size(), 0);
    const auto deadline = std::chrono::steady_clock::now() + kProbeTime;
    size_t open = probes.size();
    while (open > 0 && std::chrono::steady_clock::now() < deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (::poll(probes.data(), probes.size(), static_cast<int>(left.count()) + 1) <= 0) break;
      for (size_t i = 0; i < probes.size(); ++i) {
        if (finished[i] || probes[i].revents == 0) continue;
        finished[i] = 1;
        answered[i] = connected(probes[i].fd);
        probes[i].fd = -probes[i].fd - 1;  // poll skips negative descriptors
        --open;
      }
    }
    std::map<std::string, std::vector<int>> lost;  // host -> ranks
    for (size_t i = 0; i < probes.size(); ++i) {
      ::close(probes[i].fd < 0 ? -probes[i].fd - 1 : probes[i].fd);
      if (!answered[i]) lost[peers[static_cast<size_t>(rank_of[i])].host].push_back(rank_of[i]);
    }
    std::string text;
    for (const auto& [host, ranks] : lost)
      text += (text.empty() ? "" : "; ") + std::string(ranks.size() > 1 ? "ranks " : "rank ") +
              rank_ranges(ranks) + " on " + host + (ranks.size() > 1 ? " no longer answer" : " no longer answers");
    return text;
  } catch (...) {
    return "";
  }
}

}  // namespace mpiaccel::detail
