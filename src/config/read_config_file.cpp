// Reading a config file whole, with the one-line errors every reader of
// config files shares.

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "mpiaccel/config_files.hpp"

namespace mpiaccel {

ConfigText read_config_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    throw ConfigError("config file '" + path + "' " + (err == ENOENT ? "not found" : "cannot be opened") + ": " +
                          std::strerror(err),
                      __FILE__, __LINE__);
  }
  ConfigText out{path, ""};
  char chunk[65536];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0) out.text.append(chunk, n);
  const int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) {
    throw ConfigError("config file '" + path + "' cannot be read: " + std::strerror(err), __FILE__, __LINE__);
  }
  return out;
}

}  // namespace mpiaccel
