// libFuzzer harness: the INI parser and the config schema (Config::parse, with
// and without overrides). Any input must either parse or throw ConfigError:
// another exception, a crash or a sanitizer report is a finding.
//   tests/fuzz/run.sh builds it with clang -fsanitize=fuzzer,address,undefined.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiaccel/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  // After the first NUL byte (if any): one override per line, as a command
  // line would give them.
  const size_t split = input.find('\0');
  const std::string text = input.substr(0, split);
  std::vector<std::string> overrides;
  if (split != std::string::npos) {
    size_t at = split + 1;
    while (at <= input.size() && overrides.size() < 8) {
      const size_t end = std::min(input.find('\n', at), input.size());
      overrides.push_back(input.substr(at, end - at));
      at = end + 1;
    }
  }
  try {
    mpiaccel::Config::parse(text, "fuzz.ini", overrides);
  } catch (const mpiaccel::ConfigError&) {
  }
  return 0;
}
