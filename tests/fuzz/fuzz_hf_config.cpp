// libFuzzer harness: a model directory's config.json as [model] init_from
// reads it (interop/hf_config_check.cpp, the Llama's checks in
// interop/hf_llama.cpp): any input must pass or throw mpiaccel::Error; another
// exception, a crash, a hang or a sanitizer report is a finding.
//   tests/fuzz/run.sh builds it with clang -fsanitize=fuzzer,address,undefined.

#include <cstddef>
#include <cstdint>
#include <string>

#include "interop/hf_architecture.hpp"
#include "mpiaccel/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mpiaccel::ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_kv_head = 2;
  spec.n_embd = 64;
  try {
    mpiaccel::detail::check_hf_config_text(mpiaccel::detail::kHfLlama,
                                           std::string(reinterpret_cast<const char*>(data), size), spec,
                                           "config.json");
  } catch (const mpiaccel::Error&) {
  }
  return 0;
}
