// What `mpiaccel config --from` prints, and the key tables docs/config.md
// shows: both read the translations' own rows, so neither can drift.

#include <map>

#include "config/translator.hpp"
#include "mpiaccel/config_files.hpp"

namespace mpiaccel {

std::string describe_resolution(const ResolvedConfig& resolved) {
  std::string out =
      "; mpiaccel config, translated by `mpiaccel config --from`: every key the files set,\n"
      "; each under a comment naming the file:line (and the file's own key) it came from.\n"
      "; Keys not listed keep mpiaccel's defaults (docs/config.md).\n";
  std::map<std::string, std::vector<const ConfigSetting*>> by_section;
  std::vector<std::string> order;
  for (const auto& setting : resolved.settings) {
    const std::string section = setting.key.substr(0, setting.key.find('.'));
    if (!by_section.count(section)) order.push_back(section);
    by_section[section].push_back(&setting);
  }
  for (const auto& section : order) {
    out += "\n[" + section + "]\n";
    for (const ConfigSetting* setting : by_section[section]) {
      out += "; from " + setting->origin + " (" + setting->source_key + ")\n";
      out += setting->key.substr(section.size() + 1) + " = " + setting->value + "\n";
    }
  }
  if (resolved.train_batch_size != 0) {
    out += "\n; train_batch_size " + std::to_string(resolved.train_batch_size) + " (" +
           resolved.train_batch_size_origin + ") is checked at start-up against train.batch_size × "
           "train.grad_accum_steps × ranks\n";
  }
  if (!resolved.moot.empty()) out += "\n; moot: keys that need nothing from mpiaccel, and why\n";
  for (const auto& moot : resolved.moot) {
    out += ";   " + moot.origin + " " + moot.source_key + ": " + moot.reason + "\n";
  }
  return out;
}

const std::vector<ConfigKeyRule>& config_key_rules() {
  static const std::vector<ConfigKeyRule> rows = [] {
    std::vector<ConfigKeyRule> out;
    const std::pair<ConfigFormat, const std::vector<detail::KeyRule>*> tables[] = {
        {ConfigFormat::AccelerateYaml, &detail::accelerate_yaml_rules()},
        {ConfigFormat::DeepSpeedJson, &detail::deepspeed_json_rules()},
        {ConfigFormat::TrainerFsdpJson, &detail::trainer_fsdp_rules()},
        {ConfigFormat::TrainingArgumentsJson, &detail::training_arguments_rules()},
    };
    for (const auto& [format, table] : tables) {
      for (const auto& rule : *table) out.push_back({config_format_name(format), rule.key, rule.handling, rule.note});
    }
    return out;
  }();
  return rows;
}

}  // namespace mpiaccel
