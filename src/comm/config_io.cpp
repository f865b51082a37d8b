#include "mpiaccel/config_io.hpp"

namespace mpiaccel {
namespace {

// The broadcast message: "1" + file text, or "0" + why rank 0 could not read
// it (read_config_file's words).
constexpr char kRead = '1';
constexpr char kFailed = '0';

std::string read_on_root(const std::string& path) {
  try {
    return kRead + read_config_file(path).text;
  } catch (const ConfigError& e) {
    return kFailed + e.message();
  }
}

ConfigText broadcast_file(Communicator& comm, const std::string& path) {
  const std::string message = comm.broadcast_bytes(comm.rank() == 0 ? read_on_root(path) : "", 0);
  MPIACCEL_CHECK(!message.empty(), "load_config: rank 0 sent nothing for '" + path + "'");
  // Every rank throws the same message, so none is left waiting for the
  // others in a later collective.
  if (message[0] != kRead) throw ConfigError(message.substr(1) + " (read on rank 0)", __FILE__, __LINE__);
  return {path, message.substr(1)};
}

}  // namespace

ResolvedConfig load_resolved_config(Communicator& comm, const std::vector<std::string>& paths,
                                    const std::vector<std::string>& overrides) {
  std::vector<ConfigText> files;
  for (const auto& path : paths) files.push_back(broadcast_file(comm, path));
  ResolvedConfig resolved = resolve_config(files, overrides);
  apply_batch_arithmetic(resolved, comm.size());
  return resolved;
}

Config load_config(Communicator& comm, const std::vector<std::string>& paths,
                   const std::vector<std::string>& overrides) {
  return load_resolved_config(comm, paths, overrides).config;
}

Config load_config(Communicator& comm, const std::string& path, const std::vector<std::string>& overrides) {
  return load_config(comm, std::vector<std::string>{path}, overrides);
}

}  // namespace mpiaccel
