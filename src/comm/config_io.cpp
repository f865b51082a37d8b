#include "mpiaccel/config_io.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mpiaccel {
namespace {

// The broadcast message: "1" + file text, or "0" + why rank 0 could not read
// it (worded like Config::load_file).
constexpr char kRead = '1';
constexpr char kFailed = '0';

std::string read_on_root(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    return kFailed + ("config file '" + path + "' " +
                      (err == ENOENT ? "not found" : "cannot be opened") + ": " +
                      std::strerror(err));
  }
  std::string text(1, kRead);
  char chunk[65536];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0) text.append(chunk, n);
  const int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) return kFailed + ("config file '" + path + "' cannot be read: " + std::strerror(err));
  return text;
}

}  // namespace

Config load_config(Communicator& comm, const std::string& path,
                   const std::vector<std::string>& overrides) {
  const std::string message = comm.broadcast_bytes(comm.rank() == 0 ? read_on_root(path) : "", 0);
  MPIACCEL_CHECK(!message.empty(), "load_config: rank 0 sent nothing for '" + path + "'");
  // Every rank throws the same message, so none is left waiting for the
  // others in a later collective.
  if (message[0] != kRead)
    throw ConfigError(message.substr(1) + " (read on rank 0)", __FILE__, __LINE__);
  return Config::parse(message.substr(1), path, overrides);
}

}  // namespace mpiaccel
