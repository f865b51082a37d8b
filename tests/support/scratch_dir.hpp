#pragma once
// Scratch directories of the tests, removed when the test case ends: TempDir
// for one process, SharedDir (support/shared_dir.hpp) for every rank of the
// world. And error_of / message_of: the one-line message a call fails with.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "mpiaccel/error.hpp"

namespace mpiaccel::test {

/// A fresh directory under the system's temporary directory (mkdtemp), named
/// after `tag`; removed with everything in it at destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    std::string pattern = (std::filesystem::temp_directory_path() / ("mpiaccel_" + tag + "_XXXXXX")).string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The path of `name` in the directory.
  std::string file(const std::string& name) const { return (path / name).string(); }
  /// Writes `bytes` to `name` in the directory.
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
  }

  std::filesystem::path path;
};

/// The mpiaccel::Error message `f` throws, or "" when it returns.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

/// error_of, or "(no error)": reads better in a failed check's message.
inline std::string message_of(const std::function<void()>& f) {
  const std::string message = error_of(f);
  return message.empty() ? "(no error)" : message;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace mpiaccel::test
