// The Trainer's fsdp_config (a JSON file, or the dict inside a
// TrainingArguments JSON): transformers strips an optional "fsdp_" from each
// key and hands the rest to Accelerate, so its rows are Accelerate's
// fsdp_config rows without the prefix, before the Trainer's own.

#include "config/translator.hpp"

namespace mpiaccel::detail {
namespace {

// The Trainer passes min_num_params on only when it is > 0 (and uses it only
// with auto_wrap_policy SIZE_BASED_WRAP); 0 is its default.
void min_num_params(Translator& t, const SourceLeaf& leaf) {
  const int64_t count = t.integer(leaf);
  if (count <= 0) return t.moot(leaf, "0: the Trainer's default, no size threshold");
  t.set(leaf, "fsdp.min_num_params", std::to_string(count));
}

std::vector<KeyRule> trainer_fsdp_make_rules() {
  std::vector<KeyRule> rules{
      {"min_num_params", "mapped", "> 0: fsdp.min_num_params (used by auto_wrap_policy SIZE_BASED_WRAP)",
       min_num_params},
      {"limit_all_gathers", "moot", "at most two units are gathered at once"},
      {"xla", "refused", "mpiaccel does not run on XLA devices", {}, {"false"}},
      {"xla_fsdp_v2", "refused", "mpiaccel does not run on XLA devices", {}, {"false"}},
      {"xla_fsdp_grad_ckpt", "refused", "mpiaccel does not run on XLA devices", {}, {"false"}},
      {"xla_fsdp_settings.*", "refused", "mpiaccel does not run on XLA devices", {}, {"null"}},
      {"xla_fsdp_settings", "refused", "mpiaccel does not run on XLA devices", {}, {"null", "{}"}},
  };
  const std::string accelerate = "fsdp_config.fsdp_";
  for (const auto& rule : accelerate_yaml_rules()) {
    if (rule.key.compare(0, accelerate.size(), accelerate) != 0) continue;
    KeyRule own = rule;
    own.key = rule.key.substr(accelerate.size());
    if (find_rule(rules, own.key) == nullptr) rules.push_back(own);
  }
  return rules;
}

// "fsdp_config.fsdp_version" → "version".
std::string own_key(const std::string& path, const std::string& prefix) {
  std::string key = path.substr(prefix.size());
  if (key.compare(0, 5, "fsdp_") == 0) key = key.substr(5);
  return key;
}

}  // namespace

const std::vector<KeyRule>& trainer_fsdp_rules() {
  static const std::vector<KeyRule> rules = trainer_fsdp_make_rules();
  return rules;
}

void translate_fsdp_section(Translator& translator, const std::string& prefix) {
  for (const auto& leaf : translator.leaves()) {
    if (leaf.path.compare(0, prefix.size(), prefix) != 0) continue;
    apply_rule(translator, trainer_fsdp_rules(), leaf, own_key(leaf.path, prefix));
  }
}

Translation translate_trainer_fsdp(const std::string& source, std::vector<SourceLeaf> leaves) {
  Translator translator(source, "Trainer fsdp_config JSON", std::move(leaves));
  translate_fsdp_section(translator, "");
  return translator.result();
}

}  // namespace mpiaccel::detail
