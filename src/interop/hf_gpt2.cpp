// Our GPT's tensor names against GPT2LMHeadModel's (see hf_gpt2.hpp).

#include "interop/hf_gpt2.hpp"

#include <array>
#include <cctype>
#include <utility>

namespace mpiaccel::detail {
namespace {

constexpr const char* kPrefix = "transformer.";

// Inside a block: (ours, HF's, is a Linear/Conv1D).
constexpr std::array<std::array<const char*, 2>, 6> kBlockModules = {{
    {"ln_1", "ln_1"},
    {"attn.qkv", "attn.c_attn"},
    {"attn.proj", "attn.c_proj"},
    {"ln_2", "ln_2"},
    {"mlp.fc", "mlp.c_fc"},
    {"mlp.proj", "mlp.c_proj"},
}};

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// "<head><digits>.<rest>" -> (digits, rest); false if `name` is not so.
bool split_layer(const std::string& name, const std::string& head, std::string* index,
                 std::string* rest) {
  if (!starts_with(name, head)) return false;
  size_t i = head.size();
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == head.size() || i >= name.size() || name[i] != '.') return false;
  *index = name.substr(head.size(), i - head.size());
  *rest = name.substr(i + 1);
  return true;
}

// `rest` = "<module>.<weight|bias>" mapped from one column of the table to the other.
bool map_block(const std::string& rest, bool to_hf, std::string* mapped, bool* transposed) {
  for (const auto& [ours, hf] : kBlockModules) {
    const std::string from = to_hf ? ours : hf;
    const std::string to = to_hf ? hf : ours;
    for (const char* leaf : {"weight", "bias"}) {
      if (rest != from + "." + leaf) continue;
      *mapped = to + "." + leaf;
      *transposed = std::string(leaf) == "weight" && std::string(ours).find("ln_") != 0;
      return true;
    }
  }
  return false;
}

}  // namespace

HfTensorName hf_gpt2_name(const std::string& ours) {
  for (const char* top : {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"})
    if (ours == top) return {kPrefix + ours, false};
  std::string index, rest, mapped;
  bool transposed = false;
  if (split_layer(ours, "blocks.", &index, &rest) && map_block(rest, true, &mapped, &transposed))
    return {kPrefix + std::string("h.") + index + "." + mapped, transposed};
  return {"", false};
}

HfTensorName our_gpt_name(const std::string& hf, bool* unknown) {
  *unknown = false;
  if (hf == "lm_head.weight") return {"", false};  // tied to wte
  const std::string name = starts_with(hf, kPrefix) ? hf.substr(std::string(kPrefix).size()) : hf;
  for (const char* top : {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"})
    if (name == top) return {name, false};
  std::string index, rest, mapped;
  bool transposed = false;
  if (split_layer(name, "h.", &index, &rest)) {
    if (rest == "attn.bias" || rest == "attn.masked_bias") return {"", false};  // mask buffers
    if (map_block(rest, false, &mapped, &transposed))
      return {"blocks." + index + "." + mapped, transposed};
  }
  *unknown = true;
  return {"", false};
}

}  // namespace mpiaccel::detail
