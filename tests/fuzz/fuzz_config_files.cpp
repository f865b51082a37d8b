// libFuzzer harness: the foreign config formats (config_files.hpp): YAML
// through yaml-cpp, JSON through nlohmann/json, then the key tables and the
// combination of files. The input's first byte picks the file name (and so
// the format); after a NUL byte, a second file follows. Any input must
// resolve or throw ConfigError: another exception, a crash, a hang or a
// sanitizer report is a finding.
//   tests/fuzz/run.sh builds it with clang -fsanitize=fuzzer,address,undefined.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiaccel/config_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const kNames[] = {"fuzz.yaml", "fuzz.json", "fuzz.ini", "fuzz"};
  const std::string name = kNames[data[0] % 4];
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t split = input.find('\0');
  std::vector<mpiaccel::ConfigText> files{{name, input.substr(0, split)}};
  if (split != std::string::npos) files.push_back({"second.json", input.substr(split + 1)});
  try {
    auto resolved = mpiaccel::resolve_config(files);
    mpiaccel::describe_resolution(resolved);
    mpiaccel::apply_batch_arithmetic(resolved, 3);
  } catch (const mpiaccel::ConfigError&) {
  }
  return 0;
}
