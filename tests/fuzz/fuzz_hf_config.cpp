// libFuzzer harness: a model directory's config.json as [model] init_from
// reads it (models/hf_architecture.cpp; the settings and checks of
// models/families/llama/hf_llama.cpp and families/gpt/hf_gpt2.cpp): the family it names, the
// settings it gives, and the check against a model of ours, for both
// architectures. Any input must pass or throw mpiaccel::Error; another
// exception, a crash, a hang or a sanitizer report is a finding.
//   tests/fuzz/run.sh builds it with clang -fsanitize=fuzzer,address,undefined.

#include <cstddef>
#include <cstdint>
#include <string>

#include "models/families/gpt/gpt.hpp"
#include "models/families/llama/llama.hpp"
#include "models/hf_architecture.hpp"
#include "mpiaccel/error.hpp"

namespace {

// The two families with a transformers architecture, as the registry has
// them but for their other parts (the harness links the architectures alone).
mpiaccel::ModelFamily hf_only(const char* name, const mpiaccel::detail::HfArchitecture& arch) {
  return {name, "", mpiaccel::ModelFamily::Input::Tokens, {}, nullptr, nullptr, nullptr, nullptr, nullptr, &arch};
}

// What init_from does with a config.json: which family, which settings
// (interop/hf_pretrained.cpp), then the check every load makes.
void read_as_init_from(const std::string& text, const mpiaccel::ModelSpec& spec) {
  using namespace mpiaccel::detail;
  static const mpiaccel::ModelFamily gpt = hf_only("gpt", kHfGpt2), llama = hf_only("llama", kHfLlama);
  try {
    const nlohmann::json theirs = parse_hf_config(text, "config.json");
    const HfArchitecture& arch = *hf_family_of(theirs, "config.json", {&gpt, &llama}).hf;
    try {
      for (const HfSetting& s : arch.settings(theirs, "config.json")) (void)s.value.size();
    } catch (const nlohmann::json::exception&) {  // resolve_pretrained_config's to turn into an Error
    }
  } catch (const mpiaccel::Error&) {
  }
  for (const HfArchitecture* arch : {&kHfLlama, &kHfGpt2}) {
    try {
      check_hf_config_text(*arch, text, spec, "config.json");
    } catch (const mpiaccel::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mpiaccel::ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_kv_head = 2;
  spec.n_embd = 64;
  read_as_init_from(std::string(reinterpret_cast<const char*>(data), size), spec);
  return 0;
}
