#include "comm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

std::string make_shm_token() {
  std::random_device entropy;
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  char text[64];
  std::snprintf(text, sizeof text, "%d-%08x%08llx", static_cast<int>(::getpid()), entropy(),
                static_cast<unsigned long long>(now) & 0xffffffffULL);
  return text;
}

std::string agree_on_segment_token(int rank, int64_t bytes, const ShmSetupCollectives& collectives,
                                   const std::string& who) {
  const std::string agreed = collectives.broadcast_rank0(
      rank == 0 ? make_shm_token() + "/" + std::to_string(bytes) : std::string());
  const auto slash = agreed.find('/');
  if (!collectives.all_true(agreed.substr(slash + 1) == std::to_string(bytes)))
    MPIACCEL_THROW(who + ": the ranks asked for different sizes (rank 0: " + agreed.substr(slash + 1) +
                   " bytes, rank " + std::to_string(rank) + ": " + std::to_string(bytes) +
                   "): every rank must ask for the same size");
  return agreed.substr(0, slash);
}

std::string shm_segment_name(const std::string& token, int index) {
  return "/mpiaccel-" + token + "-" + std::to_string(index);
}

void* map_shm_segment(const std::string& name, int64_t bytes, bool create, std::string* why) {
  const int flags = create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR;
  const int fd = ::shm_open(name.c_str(), flags, 0600);
  if (fd < 0) {
    *why = "shm_open(" + name + "): " + std::strerror(errno);
    return nullptr;
  }
  if (create) {
    // posix_fallocate reserves the pages now: a /dev/shm too small for them
    // fails here, cleanly, instead of with SIGBUS at the first touch.
    int error = ::ftruncate(fd, bytes) == 0 ? 0 : errno;
    if (error == 0) error = ::posix_fallocate(fd, 0, bytes);
    if (error != 0) {
      *why = "reserving " + std::to_string(bytes) + " bytes in /dev/shm for " + name + ": " +
             std::strerror(error);
      ::close(fd);
      ::shm_unlink(name.c_str());
      return nullptr;
    }
  }
  void* address = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  ::close(fd);
  if (address == MAP_FAILED) {
    *why = "mmap(" + name + "): " + std::strerror(error);
    if (create) ::shm_unlink(name.c_str());
    return nullptr;
  }
  return address;
}

int64_t round_up_to_pages(int64_t bytes) {
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  return (std::max<int64_t>(bytes, 1) + page - 1) / page * page;
}

}  // namespace mpiaccel::detail
