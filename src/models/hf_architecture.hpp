#pragma once
// A model family as a transformers architecture (ModelFamily::hf): how our
// tensor names map to theirs, and what their config.json says (each in its
// family's folder: families/gpt/hf_gpt2.cpp, families/llama/hf_llama.cpp).
// export_hf_model and load_hf_model (interop/hf_model.hpp) are the one
// mechanism over all of them.

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "mpiaccel/config.hpp"
#include "mpiaccel/model_family.hpp"

namespace mpiaccel::detail {

struct HfTensorName {
  std::string name;          ///< "" when that side keeps no such tensor
  bool transposed = false;   ///< stored as the transpose of ours
};

/// One setting of ours that a config.json gives: `key` ("model.n_layer") =
/// `value` (its INI text), from their `field` ("num_hidden_layers").
struct HfSetting {
  std::string key;
  std::string value;
  std::string field;
};

struct HfArchitecture {
  const char* hf_class;    ///< theirs: "GPT2LMHeadModel", "LlamaForCausalLM"
  const char* model_type;  ///< config.json's model_type: "gpt2", "llama"
  const char* embedding;   ///< our token embedding (its rows are the vocabulary)
  /// Their name of our tensor `ours` ("" = they keep none).
  HfTensorName (*to_hf)(const std::string& ours);
  /// Our name of their tensor `hf` ("" = a tensor of theirs we do not keep);
  /// `unknown` set when `hf` is no tensor of the architecture at all.
  HfTensorName (*to_ours)(const std::string& hf, const ModelSpec& spec, bool* unknown);
  /// Their config.json for a model of `spec` trained under `config`.
  nlohmann::ordered_json (*config_json)(const ModelSpec& spec, const Config& config);
  /// Throws Error when `theirs` (a config.json at `where`) describes another
  /// model than `spec`, naming the key and the [model] setting to change.
  void (*check_config)(const nlohmann::json& theirs, const ModelSpec& spec, const std::string& where);
  /// Every setting of ours that `theirs` (a config.json at `where`) decides:
  /// the model's dimensions, as transformers' from_pretrained takes them.
  /// Throws Error naming a field whose value this model cannot compute.
  std::vector<HfSetting> (*settings)(const nlohmann::json& theirs, const std::string& where);
};

/// `text` (a config.json at `where`) checked by arch.check_config against
/// `spec`: text that is not JSON, or values of other types than the
/// architecture's, are an Error naming `where` as well.
void check_hf_config_text(const HfArchitecture& arch, const std::string& text, const ModelSpec& spec,
                          const std::string& where);

/// The architecture of our model family `kind` (family_registry.cpp);
/// throws Error for a family that has none.
const HfArchitecture& hf_architecture(const std::string& kind);

/// The family among `families` (default: every registered one) whose
/// architecture a config.json (at `where`) describes, by its model_type (or,
/// without one, its architectures); throws Error naming what it says and the
/// ones there are.
const ModelFamily& hf_family_of(const nlohmann::json& theirs, const std::string& where,
                                const std::vector<const ModelFamily*>& families);
const ModelFamily& hf_family_of(const nlohmann::json& theirs, const std::string& where);

/// `text` parsed as a config.json holding one JSON object; throws Error
/// naming `where` otherwise.
nlohmann::json parse_hf_config(const std::string& text, const std::string& where);

}  // namespace mpiaccel::detail
