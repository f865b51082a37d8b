// Several config files, any mix of formats, into one Config: each file is
// translated into settings with their origins; settings of different files
// must agree; the Trainer's defaults fill only keys no file sets; the
// command line's overrides beat every file.

#include "mpiaccel/config_files.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "config/config_access.hpp"
#include "config/translator.hpp"
#include "config/value_text.hpp"

namespace mpiaccel {
namespace {

using detail::SourceLeaf;
using detail::Translation;

std::string extension_of(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  return detail::lower(path.substr(dot + 1));
}

bool has_top_key(const std::vector<SourceLeaf>& leaves, const std::set<std::string>& names) {
  for (const auto& leaf : leaves) {
    if (names.count(leaf.path.substr(0, leaf.path.find('.')))) return true;
  }
  return false;
}

ConfigFormat json_format(const ConfigText& file, const std::vector<SourceLeaf>& leaves) {
  static const std::set<std::string> trainer{"output_dir", "per_device_train_batch_size", "num_train_epochs",
                                             "learning_rate", "logging_steps", "eval_strategy"};
  static const std::set<std::string> deepspeed{
      "train_batch_size", "train_micro_batch_size_per_gpu", "zero_optimization", "fp16", "bf16", "optimizer",
      "scheduler", "gradient_clipping", "gradient_accumulation_steps", "steps_per_print", "amp",
      "wall_clock_breakdown"};
  if (leaves.empty() || has_top_key(leaves, trainer)) {
    return leaves.empty() ? ConfigFormat::DeepSpeedJson : ConfigFormat::TrainingArgumentsJson;
  }
  if (has_top_key(leaves, deepspeed)) return ConfigFormat::DeepSpeedJson;
  for (const auto& leaf : leaves) {
    std::string key = leaf.path;
    if (key.compare(0, 5, "fsdp_") == 0) key = key.substr(5);
    if (detail::find_rule(detail::trainer_fsdp_rules(), key) != nullptr) return ConfigFormat::TrainerFsdpJson;
  }
  throw ConfigError(file.path + ":1: a JSON config of no format mpiaccel reads; accepted: DeepSpeed's "
                        "(zero_optimization, train_batch_size, ...), a TrainingArguments JSON (output_dir, ...) "
                        "or the Trainer's fsdp_config (transformer_layer_cls_to_wrap, ...)",
                    __FILE__, __LINE__);
}

bool looks_like_yaml(const std::string& text) {
  for (const char* key : {"distributed_type:", "compute_environment:", "fsdp_config:", "num_processes:"}) {
    if (text.rfind(key, 0) == 0 || text.find(std::string("\n") + key) != std::string::npos) return true;
  }
  return false;
}

std::vector<ConfigSetting> ini_settings(const ConfigText& file) {
  Config config;
  std::vector<ConfigSetting> settings;
  for (const auto& [key, line] : detail::parse_ini(file.text, file.path, config)) {
    const std::string source_key = "[" + key.substr(0, key.find('.')) + "] " + key.substr(key.find('.') + 1);
    settings.push_back({key, config.get(key), file.path + ":" + std::to_string(line), source_key});
  }
  return settings;
}

Translation translate(const ConfigText& file) {
  const ConfigFormat format = detect_config_format(file);
  switch (format) {
    case ConfigFormat::Ini: {
      Translation translation;
      translation.settings = ini_settings(file);
      return translation;
    }
    case ConfigFormat::AccelerateYaml:
      return detail::translate_accelerate_yaml(file.path, detail::read_yaml_leaves(file.text, file.path));
    case ConfigFormat::DeepSpeedJson:
      return detail::translate_deepspeed_json(file.path, detail::read_json_leaves(file.text, file.path));
    case ConfigFormat::TrainerFsdpJson:
      return detail::translate_trainer_fsdp(file.path, detail::read_json_leaves(file.text, file.path));
    case ConfigFormat::TrainingArgumentsJson:
      return detail::translate_training_arguments(file.path, detail::read_json_leaves(file.text, file.path));
  }
  MPIACCEL_THROW("unknown config format");
}

// The settings of every file, combined: one value per key.
class Combiner {
 public:
  explicit Combiner(std::set<std::string> overridden) : overridden_(std::move(overridden)) {}

  void add(const ConfigSetting& setting, bool weak) {
    ConfigSetting placed = setting;
    placed.value = canonical(setting);
    auto found = index_.find(setting.key);
    if (found == index_.end()) {
      index_[setting.key] = settings_.size();
      settings_.push_back(placed);
      return;
    }
    const ConfigSetting& earlier = settings_[found->second];
    if (weak || earlier.value == placed.value || overridden_.count(setting.key)) return;
    throw ConfigError(earlier.origin + " (" + earlier.source_key + ") sets " + setting.key + " = " + earlier.value +
                          ", but " + placed.origin + " (" + placed.source_key + ") sets it to " + placed.value +
                          "; accepted: one value (remove one, or choose on the command line: " + setting.key +
                          "=VALUE)",
                      __FILE__, __LINE__);
  }

  std::vector<ConfigSetting> take() { return std::move(settings_); }

 private:
  // The value as mpiaccel writes it (1e-3 and 0.001 agree); a value the key
  // does not accept is refused here, naming the file's line and key.
  static std::string canonical(const ConfigSetting& setting) {
    Config scratch;
    const size_t dot = setting.key.find('.');
    const std::string why =
        detail::set_key(scratch, setting.key.substr(0, dot), setting.key.substr(dot + 1), setting.value);
    if (!why.empty()) throw ConfigError(setting.origin + ": " + setting.source_key + " gives " + why, __FILE__, __LINE__);
    return scratch.get(setting.key);
  }

  std::set<std::string> overridden_;
  std::map<std::string, size_t> index_;
  std::vector<ConfigSetting> settings_;
};

// A DeepSpeed warmup of "auto" length and logarithmic shape: refused when
// the other files give it steps (mpiaccel warms up linearly).
void check_log_warmup(const std::vector<Translation>& translations, const ResolvedConfig& resolved) {
  for (const auto& translation : translations) {
    if (translation.log_warmup_origin.empty() || resolved.config.scheduler.warmup_steps == 0) continue;
    throw ConfigError(translation.log_warmup_origin + ": scheduler.params.warmup_num_steps = \"auto\" is " +
                          std::to_string(resolved.config.scheduler.warmup_steps) +
                          " steps here, and DeepSpeed warms up logarithmically unless warmup_type is linear; "
                          "mpiaccel warms up linearly; accepted: \"warmup_type\": \"linear\" beside it",
                      __FILE__, __LINE__);
  }
}

std::set<std::string> overridden_keys(const std::vector<std::string>& overrides) {
  std::set<std::string> keys;
  for (const auto& assignment : overrides) {
    keys.insert(detail::trim(assignment.substr(0, assignment.find('='))));
  }
  return keys;
}

void take_batch_size(ResolvedConfig& resolved, const Translation& translation) {
  if (translation.train_batch_size == 0) return;
  if (resolved.train_batch_size != 0 && resolved.train_batch_size != translation.train_batch_size) {
    throw ConfigError(resolved.train_batch_size_origin + " sets train_batch_size = " +
                          std::to_string(resolved.train_batch_size) + ", but " +
                          translation.train_batch_size_origin + " sets it to " +
                          std::to_string(translation.train_batch_size) + "; accepted: one value",
                      __FILE__, __LINE__);
  }
  resolved.train_batch_size = translation.train_batch_size;
  resolved.train_batch_size_origin = translation.train_batch_size_origin;
}

}  // namespace

std::string config_format_name(ConfigFormat format) {
  switch (format) {
    case ConfigFormat::Ini: return "INI";
    case ConfigFormat::AccelerateYaml: return "Accelerate YAML";
    case ConfigFormat::DeepSpeedJson: return "DeepSpeed JSON";
    case ConfigFormat::TrainerFsdpJson: return "Trainer fsdp_config JSON";
    case ConfigFormat::TrainingArgumentsJson: return "TrainingArguments JSON";
  }
  return "unknown";
}

ConfigFormat detect_config_format(const ConfigText& file) {
  const std::string extension = extension_of(file.path);
  if (extension == "yaml" || extension == "yml") return ConfigFormat::AccelerateYaml;
  const size_t first = file.text.find_first_not_of(" \t\r\n");
  const bool json = extension == "json" || (first != std::string::npos && file.text[first] == '{');
  if (json) return json_format(file, detail::read_json_leaves(file.text, file.path));
  if (extension != "ini" && extension != "cfg" && looks_like_yaml(file.text)) return ConfigFormat::AccelerateYaml;
  return ConfigFormat::Ini;
}

ResolvedConfig resolve_config(const std::vector<ConfigText>& files, const std::vector<std::string>& overrides) {
  ResolvedConfig resolved;
  std::vector<Translation> translations;
  for (const auto& file : files) translations.push_back(translate(file));
  Combiner combiner(overridden_keys(overrides));
  for (const auto& translation : translations) {
    for (const auto& setting : translation.settings) combiner.add(setting, false);
    resolved.moot.insert(resolved.moot.end(), translation.moot.begin(), translation.moot.end());
    take_batch_size(resolved, translation);
  }
  for (const auto& translation : translations) {
    for (const auto& setting : translation.weak_settings) combiner.add(setting, true);
  }
  resolved.settings = combiner.take();
  for (const auto& setting : resolved.settings) resolved.config.set(setting.key, setting.value);
  for (const auto& assignment : overrides) {
    detail::apply_assignment(resolved.config, assignment, "override");
    const std::string key = detail::trim(assignment.substr(0, assignment.find('=')));
    auto& settings = resolved.settings;
    settings.erase(std::remove_if(settings.begin(), settings.end(), [&](const auto& s) { return s.key == key; }),
                   settings.end());
    resolved.settings.push_back({key, resolved.config.get(key), "command line", assignment});
  }
  check_log_warmup(translations, resolved);
  return resolved;
}

std::string default_config_path(const std::map<std::string, std::string>& env) {
  const auto value_of = [&](const char* name) {
    const auto found = env.find(name);
    return found == env.end() ? std::string() : found->second;
  };
  std::string base = value_of("XDG_CONFIG_HOME");
  if (base.empty()) {
    const std::string home = value_of("HOME");
    if (home.empty()) return "";
    base = home + "/.config";
  }
  return base + "/mpiaccel/default.ini";
}

std::string default_config_path() {
  std::map<std::string, std::string> env;
  for (const char* name : {"XDG_CONFIG_HOME", "HOME"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  return default_config_path(env);
}

ResolvedConfig resolve_config_files(const std::vector<std::string>& paths, const std::vector<std::string>& overrides) {
  std::vector<ConfigText> files;
  for (const auto& path : paths) files.push_back(read_config_file(path));
  return resolve_config(files, overrides);
}

namespace {

bool was_set(const ResolvedConfig& resolved, const std::string& key) {
  for (const auto& setting : resolved.settings) {
    if (setting.key == key) return true;
  }
  return false;
}

// total / (a × b), at least 1 (the product is checked afterwards).
int64_t share(int64_t total, int64_t a, int64_t b) {
  int64_t divisor = 0;
  if (__builtin_mul_overflow(a, b, &divisor) || divisor <= 0) return 1;
  return std::max<int64_t>(1, total / divisor);
}

}  // namespace

void apply_batch_arithmetic(ResolvedConfig& resolved, int64_t world_size) {
  const int64_t total = resolved.train_batch_size;
  if (total == 0) return;
  TrainConfig& train = resolved.config.train;
  // With split_batches, train.batch_size is already the global micro batch.
  const int64_t ranks = train.split_batches ? 1 : world_size;
  const std::string ranks_text =
      train.split_batches ? "1 (split_batches)" : std::to_string(world_size) + " ranks";
  const bool micro_set = was_set(resolved, "train.batch_size");
  const bool accum_set = was_set(resolved, "train.grad_accum_steps");
  // DeepSpeed derives what no file gives; neither given: accumulation 1.
  if (!micro_set && !accum_set) train.grad_accum_steps = 1;
  if (!micro_set) train.batch_size = share(total, train.grad_accum_steps, ranks);
  if (micro_set && !accum_set) train.grad_accum_steps = share(total, train.batch_size, ranks);
  int64_t product = 0;
  const bool overflow = __builtin_mul_overflow(train.batch_size, train.grad_accum_steps, &product) ||
                        __builtin_mul_overflow(product, ranks, &product);
  if (!overflow && product == total) return;
  const std::string made = overflow ? "more than 2^63" : std::to_string(product);
  throw ConfigError(resolved.train_batch_size_origin + ": train_batch_size = " + std::to_string(total) +
                        ", but train.batch_size " + std::to_string(train.batch_size) + " × train.grad_accum_steps " +
                        std::to_string(train.grad_accum_steps) + " × " + ranks_text + " = " + made + "; accepted: " + made +
                        ", \"auto\", or a micro batch and accumulation that multiply to it",
                    __FILE__, __LINE__);
}

}  // namespace mpiaccel
