// Our GPT's tensor names against GPT2LMHeadModel's (see hf_gpt2.hpp).

#include "interop/hf_gpt2.hpp"

#include <array>
#include <cctype>
#include <utility>

#include "mpiaccel/error.hpp"

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

namespace {

HfTensorName gpt_name_for(const std::string& hf, const ModelSpec&, bool* unknown) { return our_gpt_name(hf, unknown); }

// GPT2Config of our GPT.
nlohmann::ordered_json gpt2_config(const ModelSpec& spec, const Config& config) {
  nlohmann::ordered_json c;
  c["architectures"] = {"GPT2LMHeadModel"};
  c["model_type"] = "gpt2";
  c["vocab_size"] = spec.vocab_size;
  c["n_embd"] = spec.n_embd;
  c["n_positions"] = spec.block_size;
  c["n_ctx"] = spec.block_size;
  c["n_layer"] = spec.n_layer;
  c["n_head"] = spec.n_head;
  c["n_inner"] = nullptr;  // 4 x n_embd, as ours
  c["activation_function"] = config.model.activation == "gelu_tanh" ? "gelu_new" : "gelu";
  c["layer_norm_epsilon"] = 1e-5;
  c["resid_pdrop"] = config.model.dropout;
  c["embd_pdrop"] = config.model.dropout;
  c["attn_pdrop"] = config.model.dropout;
  c["initializer_range"] = 0.02;
  c["scale_attn_weights"] = true;
  c["tie_word_embeddings"] = true;
  c["use_cache"] = true;
  // No beginning or end-of-text token in our vocabularies (GPT-2's 50256
  // would be outside a byte-level one).
  c["bos_token_id"] = nullptr;
  c["eos_token_id"] = nullptr;
  return c;
}

// GPT-2 files are checked by their tensors' shapes alone (config.json is
// optional beside a lone .safetensors file, and GPT-2's carries no setting
// the shapes miss but the activation, which [model] activation chooses).
void gpt2_check(const nlohmann::json&, const ModelSpec&, const std::string&) {}

}  // namespace

const HfArchitecture kHfGpt2 = {"gpt", "GPT2LMHeadModel", "wte.weight", hf_gpt2_name, gpt_name_for, gpt2_config, gpt2_check};

}  // namespace mpiaccel::detail
