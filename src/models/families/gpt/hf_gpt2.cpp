// Our GPT's tensor names against GPT2LMHeadModel's (see hf_gpt2.hpp).

#include "models/families/gpt/hf_gpt2.hpp"

#include <array>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "models/families/gpt/gpt.hpp"
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
  c["activation_function"] = config.model.activation == Activation::GeluTanh ? "gelu_new" : "gelu";
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

// Our activation of GPT2Config's activation_function; Error for one our GPT
// does not compute.
Activation our_activation(const nlohmann::json& c, const std::string& where) {
  const nlohmann::json f = c.value("activation_function", nlohmann::json("gelu_new"));
  const std::string name = f.is_string() ? f.get<std::string>() : f.dump();
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return Activation::GeluTanh;
  if (name == "gelu") return Activation::Gelu;
  MPIACCEL_THROW(where + ": activation_function " + f.dump() + " is not one the GPT here computes; accepted: "
                 "gelu_new, gelu_pytorch_tanh (model.activation = gelu_tanh), gelu");
}

// GPT2Config's fields that change what the GPT computes and that it has no
// key for: refused by name unless they hold GPT-2's (and our) values.
void check_fixed_fields(const nlohmann::json& c, int64_t n_embd, const std::string& where) {
  auto fixed = [&](const char* field, const nlohmann::json& ours) {
    const nlohmann::json theirs = c.value(field, ours);
    const bool same = theirs.is_number() && ours.is_number() ? theirs.get<double>() == ours.get<double>() : theirs == ours;
    MPIACCEL_CHECK(same || theirs.is_null(), where + ": " + field + " = " + theirs.dump() +
                                                 " is not one the GPT here computes (it computes " + ours.dump() + ")");
  };
  fixed("layer_norm_epsilon", 1e-5);
  fixed("n_inner", n_embd > 0 ? nlohmann::json(4 * n_embd) : nlohmann::json());
  fixed("scale_attn_weights", true);
  fixed("scale_attn_by_inverse_layer_idx", false);
  fixed("add_cross_attention", false);
  fixed("tie_word_embeddings", true);  // our GPT's head is always its token embedding
}

// What a GPT-2 config.json says that the tensors' shapes do not (the shapes
// are checked tensor by tensor on load, with the [model] keys to set): the
// heads and the activation. A lone .safetensors file has no config.json.
void gpt2_check(const nlohmann::json& c, const ModelSpec& spec, const std::string& where) {
  if (c.contains("n_head") && c["n_head"].is_number_integer())
    MPIACCEL_CHECK(c["n_head"].get<int64_t>() == spec.n_head,
                   where + ": n_head = " + c["n_head"].dump() + " but [model] n_head gives " +
                       std::to_string(spec.n_head) + ": set model.n_head to the file's");
  const Activation activation = our_activation(c, where);
  MPIACCEL_CHECK(activation == spec.activation, where + ": activation_function = " + c.value("activation_function", nlohmann::json("gelu_new")).dump() +
                                                    " but [model] activation gives \"" + name_of(spec.activation) +
                                                    "\": set model.activation to " + name_of(activation));
  check_fixed_fields(c, spec.n_embd, where);
}

// GPT2Config's fields as our keys: every dimension, the activation, and
// the sequence length (our position table has n_positions rows).
std::vector<HfSetting> gpt2_settings(const nlohmann::json& c, const std::string& where) {
  std::vector<HfSetting> out;
  for (const auto& [field, key] : {std::pair<const char*, const char*>{"n_layer", "model.n_layer"},
                                   {"n_head", "model.n_head"},
                                   {"n_embd", "model.n_embd"},
                                   {"vocab_size", "model.vocab_size"},
                                   {"n_positions", "train.seq_len"}}) {
    MPIACCEL_CHECK(c.contains(field) && c[field].is_number_integer(),
                   where + ": " + field + " is " + (c.contains(field) ? c[field].dump() : "missing") +
                       ": a GPT2Config holds it as an integer");
    out.push_back({key, std::to_string(c[field].get<int64_t>()), field});
  }
  out.push_back({"model.activation", name_of(our_activation(c, where)), "activation_function"});
  check_fixed_fields(c, c["n_embd"].get<int64_t>(), where);
  return out;
}

}  // namespace

const HfArchitecture kHfGpt2 = {"GPT2LMHeadModel", "gpt2",      "wte.weight", hf_gpt2_name,
                                gpt_name_for,      gpt2_config, gpt2_check,   gpt2_settings};

}  // namespace mpiaccel::detail
