// The bundled Llama as transformers' LlamaForCausalLM: the same module tree
// and names (llama.cpp), so tensors map name for name, and a
// config.json that says what our [model] keys say.

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "models/families/llama/llama.hpp"
#include "models/hf_architecture.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_llama_tensor(const std::string& name) {
  return name == "model.embed_tokens.weight" || name == "model.norm.weight" || name == "lm_head.weight" ||
         name.compare(0, 13, "model.layers.") == 0;
}

HfTensorName llama_to_hf(const std::string& ours) { return {ours, false}; }

HfTensorName llama_to_ours(const std::string& hf, const ModelSpec& spec, bool* unknown) {
  *unknown = false;
  // Older files keep the rotary frequencies as a buffer: computed here.
  if (ends_with(hf, ".rotary_emb.inv_freq")) return {"", false};
  // A tied head is the embedding; a file may still carry a copy.
  if (hf == "lm_head.weight" && spec.tie_word_embeddings) return {"", false};
  if (!is_llama_tensor(hf)) *unknown = true;
  return {*unknown ? "" : hf, false};
}

// transformers' rope_type of our [model] rope_scaling.
const char* hf_rope_type(RopeScaling scaling) { return scaling == RopeScaling::Llama3 ? "llama3" : "default"; }

nlohmann::ordered_json rope_parameters(const ModelSpec& spec) {
  nlohmann::ordered_json rope;
  rope["rope_type"] = hf_rope_type(spec.rope_scaling);
  rope["rope_theta"] = spec.rope_theta;
  if (spec.rope_scaling == RopeScaling::Llama3) {
    rope["factor"] = spec.rope_scaling_factor;
    rope["low_freq_factor"] = spec.rope_low_freq_factor;
    rope["high_freq_factor"] = spec.rope_high_freq_factor;
    rope["original_max_position_embeddings"] = spec.rope_original_max_positions;
  }
  return rope;
}

// LlamaConfig, in transformers 5's form (rope_parameters) and, for readers
// of 4.x, the older rope_theta and rope_scaling beside it.
nlohmann::ordered_json llama_config(const ModelSpec& spec, const Config& config) {
  nlohmann::ordered_json c;
  c["architectures"] = {"LlamaForCausalLM"};
  c["model_type"] = "llama";
  c["vocab_size"] = spec.vocab_size;
  c["hidden_size"] = spec.n_embd;
  c["intermediate_size"] = spec.swiglu_width();
  c["num_hidden_layers"] = spec.n_layer;
  c["num_attention_heads"] = spec.n_head;
  c["num_key_value_heads"] = spec.kv_heads();
  c["head_dim"] = spec.head_width();
  c["hidden_act"] = "silu";
  c["max_position_embeddings"] = spec.block_size;
  c["initializer_range"] = 0.02;
  c["rms_norm_eps"] = spec.rms_norm_eps;
  c["use_cache"] = true;
  c["tie_word_embeddings"] = spec.tie_word_embeddings;
  c["rope_parameters"] = rope_parameters(spec);
  c["rope_theta"] = spec.rope_theta;
  if (spec.rope_scaling == RopeScaling::Llama3) c["rope_scaling"] = rope_parameters(spec);
  c["attention_bias"] = spec.attention_bias;
  c["attention_dropout"] = config.model.dropout;
  c["mlp_bias"] = spec.mlp_bias;
  c["bos_token_id"] = nullptr;
  c["eos_token_id"] = nullptr;
  c["pad_token_id"] = nullptr;
  return c;
}

// Compares one value of their config.json with ours.
class ConfigCheck {
 public:
  ConfigCheck(const nlohmann::json& theirs, std::string where) : theirs_(theirs), where_(std::move(where)) {}

  /// `key` (absent: `fallback`) against our `ours`, set by [model] `setting`.
  template <class T>
  void same(const std::string& key, const T& ours, const std::string& setting, const nlohmann::json& fallback) const {
    const nlohmann::json& value = theirs_.contains(key) && !theirs_[key].is_null() ? theirs_[key] : fallback;
    if (agrees(value, nlohmann::json(ours))) return;
    MPIACCEL_THROW(where_ + ": " + key + " = " + value.dump() + " but [model] " + setting + " gives " +
                   nlohmann::json(ours).dump() + ": set model." + setting + " to the file's");
  }

 private:
  static bool agrees(const nlohmann::json& a, const nlohmann::json& b) {
    if (a.is_number() && b.is_number()) {
      const double x = a.get<double>(), y = b.get<double>();
      return std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y));
    }
    return a == b;
  }

  const nlohmann::json& theirs_;
  std::string where_;
};

// The rope settings of a 5.x (rope_parameters) or 4.x (rope_theta,
// rope_scaling) config.json, as one object.
nlohmann::json their_rope(const nlohmann::json& c) {
  nlohmann::json rope = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? c["rope_parameters"]
                        : c.contains("rope_scaling") && c["rope_scaling"].is_object()     ? c["rope_scaling"]
                                                                                          : nlohmann::json::object();
  if (!rope.contains("rope_type")) rope["rope_type"] = rope.contains("type") ? rope["type"] : nlohmann::json("default");
  if (!rope.contains("rope_theta")) rope["rope_theta"] = c.value("rope_theta", 10000.0);
  return rope;
}

void check_rope(const nlohmann::json& c, const ModelSpec& spec, const std::string& where) {
  const nlohmann::json rope = their_rope(c);
  const ConfigCheck check(rope, where + " (rope)");
  check.same("rope_theta", spec.rope_theta, "rope_theta", 10000.0);
  const std::string type = rope["rope_type"].is_string() ? rope["rope_type"].get<std::string>() : "?";
  MPIACCEL_CHECK(type == "default" || type == "llama3",
                 where + ": rope_type " + type + " is not one the Llama here computes; accepted: default, llama3");
  check.same("rope_type", hf_rope_type(spec.rope_scaling), "rope_scaling", "default");
  if (type != "llama3") return;
  check.same("factor", spec.rope_scaling_factor, "rope_scaling_factor", nullptr);
  check.same("low_freq_factor", spec.rope_low_freq_factor, "rope_low_freq_factor", nullptr);
  check.same("high_freq_factor", spec.rope_high_freq_factor, "rope_high_freq_factor", nullptr);
  check.same("original_max_position_embeddings", spec.rope_original_max_positions, "rope_original_max_positions", nullptr);
}

void llama_check(const nlohmann::json& c, const ModelSpec& spec, const std::string& where) {
  MPIACCEL_CHECK(c.value("model_type", std::string("llama")) == "llama",
                 where + ": model_type " + c["model_type"].dump() + " is not llama: [train] model = llama reads "
                         "LlamaForCausalLM directories");
  MPIACCEL_CHECK(c.value("hidden_act", std::string("silu")) == "silu",
                 where + ": hidden_act " + c["hidden_act"].dump() + " is not silu, the Llama's SwiGLU");
  const ConfigCheck check(c, where);
  check.same("num_hidden_layers", spec.n_layer, "n_layer", nullptr);
  check.same("hidden_size", spec.n_embd, "n_embd", nullptr);
  check.same("num_attention_heads", spec.n_head, "n_head", nullptr);
  check.same("num_key_value_heads", spec.kv_heads(), "n_kv_head", c.value("num_attention_heads", nlohmann::json()));
  const nlohmann::json default_head = c.value("hidden_size", 0) / std::max(1, c.value("num_attention_heads", 1));
  check.same("head_dim", spec.head_width(), "head_dim", default_head);
  check.same("intermediate_size", spec.swiglu_width(), "intermediate_size", nullptr);
  check.same("vocab_size", spec.vocab_size, "vocab_size", nullptr);
  check.same("rms_norm_eps", spec.rms_norm_eps, "rms_norm_eps", 1e-6);
  check.same("attention_bias", spec.attention_bias, "attention_bias", false);
  check.same("mlp_bias", spec.mlp_bias, "mlp_bias", false);
  check.same("tie_word_embeddings", spec.tie_word_embeddings, "tie_word_embeddings", false);
  check_rope(c, spec, where);
}

// A JSON number or bool as INI text; `fallback` when `value` is absent or null.
std::string setting_text(const nlohmann::json& value, const nlohmann::json& fallback, const std::string& where,
                         const std::string& field) {
  const nlohmann::json& v = value.is_null() ? fallback : value;
  MPIACCEL_CHECK(v.is_number() || v.is_boolean(),
                 where + ": " + field + " = " + v.dump() + " is not a number: the Llama reads numbers there");
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer() || v.is_number_unsigned()) return std::to_string(v.get<int64_t>());
  return v.dump();
}

// LlamaConfig's fields as our [model] keys, with LlamaConfig's defaults
// where a file leaves one out.
std::vector<HfSetting> llama_settings(const nlohmann::json& c, const std::string& where) {
  MPIACCEL_CHECK(c.value("hidden_act", std::string("silu")) == "silu",
                 where + ": hidden_act " + c["hidden_act"].dump() + " is not silu, the Llama's SwiGLU");
  std::vector<HfSetting> out;
  auto take = [&](const nlohmann::json& from, const std::string& field, const std::string& key,
                  const nlohmann::json& fallback) {
    MPIACCEL_CHECK(from.contains(field) || !fallback.is_null(), where + " has no " + field + ": not a LlamaConfig");
    out.push_back({key, setting_text(from.value(field, nlohmann::json()), fallback, where, field), field});
  };
  take(c, "num_hidden_layers", "model.n_layer", nullptr);
  take(c, "hidden_size", "model.n_embd", nullptr);
  take(c, "num_attention_heads", "model.n_head", nullptr);
  take(c, "num_key_value_heads", "model.n_kv_head", c.value("num_attention_heads", nlohmann::json()));
  take(c, "head_dim", "model.head_dim", 0);  // 0: hidden_size / num_attention_heads, as theirs
  take(c, "intermediate_size", "model.intermediate_size", nullptr);
  take(c, "vocab_size", "model.vocab_size", nullptr);
  take(c, "rms_norm_eps", "model.rms_norm_eps", 1e-6);
  take(c, "attention_bias", "model.attention_bias", false);
  take(c, "mlp_bias", "model.mlp_bias", false);
  take(c, "tie_word_embeddings", "model.tie_word_embeddings", false);
  const nlohmann::json rope = their_rope(c);
  const std::string type = rope["rope_type"].is_string() ? rope["rope_type"].get<std::string>() : "?";
  MPIACCEL_CHECK(type == "default" || type == "llama3",
                 where + ": rope_type " + type + " is not one the Llama here computes; accepted: default, llama3");
  take(rope, "rope_theta", "model.rope_theta", 10000.0);
  out.push_back({"model.rope_scaling", type == "llama3" ? "llama3" : "none", "rope_type"});
  if (type == "llama3") {
    take(rope, "factor", "model.rope_scaling_factor", nullptr);
    take(rope, "low_freq_factor", "model.rope_low_freq_factor", nullptr);
    take(rope, "high_freq_factor", "model.rope_high_freq_factor", nullptr);
    take(rope, "original_max_position_embeddings", "model.rope_original_max_positions", nullptr);
  }
  return out;
}

}  // namespace

const HfArchitecture kHfLlama = {"LlamaForCausalLM", "llama",       "model.embed_tokens.weight",
                                 llama_to_hf,        llama_to_ours, llama_config, llama_check, llama_settings};

}  // namespace mpiaccel::detail
