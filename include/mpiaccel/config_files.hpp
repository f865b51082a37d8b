#pragma once
// The config files users bring, as they are: mpiaccel's INI, Accelerate's
// YAML (`accelerate config`), DeepSpeed's JSON, the Trainer's fsdp_config JSON
// and a TrainingArguments JSON (to_json_string). Each file is translated into
// `section.key = value` settings of the one typed Config, every setting
// remembering the file:line it came from; several files combine, and two that
// set one key to different values are an error naming both places.
// docs/config.md, "Config files from Accelerate, DeepSpeed and the Trainer",
// has the key-by-key tables (config_key_rules() below).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mpiaccel/config.hpp"

namespace mpiaccel {

enum class ConfigFormat { Ini, AccelerateYaml, DeepSpeedJson, TrainerFsdpJson, TrainingArgumentsJson };

/// "INI", "Accelerate YAML", "DeepSpeed JSON", ...
std::string config_format_name(ConfigFormat format);

/// A config file's name and bytes (read on one rank, parsed on every rank).
struct ConfigText {
  std::string path;
  std::string text;
};

/// The format of a file, told by its extension and, for JSON, by its keys
/// (DeepSpeed: zero_optimization, train_batch_size, ...; TrainingArguments:
/// output_dir, per_device_train_batch_size, ...; otherwise fsdp_config keys).
/// Throws ConfigError for a JSON file that is none of them.
ConfigFormat detect_config_format(const ConfigText& file);

/// One key a file (or the command line) set: "distributed.strategy" = "fsdp"
/// from "accelerate.yaml:2" (its own key: "distributed_type").
struct ConfigSetting {
  std::string key;
  std::string value;
  std::string origin;
  std::string source_key;
};

/// A key of a file that needs nothing from mpiaccel, and why
/// ("main_process_ip": "MPI discovers the ranks").
struct ConfigMootKey {
  std::string origin;
  std::string source_key;
  std::string reason;
};

struct ResolvedConfig {
  Config config;
  std::vector<ConfigSetting> settings;  ///< every key set by a file or override, in order
  std::vector<ConfigMootKey> moot;
  /// DeepSpeed's train_batch_size (0 = not given or "auto") and where it was
  /// set: checked against the world size at start-up.
  int64_t train_batch_size = 0;
  std::string train_batch_size_origin;
};

/// Translates `files` (in order, any mix of formats), then applies
/// `overrides` ("section.key=value"), which beat the files. Throws
/// ConfigError with one line naming file:line for a bad file, a refused key,
/// or two files that disagree.
ResolvedConfig resolve_config(const std::vector<ConfigText>& files,
                              const std::vector<std::string>& overrides = {});

/// Reads a config file; throws ConfigError naming the path if it cannot.
ConfigText read_config_file(const std::string& path);

/// resolve_config on files read from disk (one process; under MPI use
/// load_config of config_io.hpp).
ResolvedConfig resolve_config_files(const std::vector<std::string>& paths,
                                    const std::vector<std::string>& overrides = {});

/// DeepSpeed's batch arithmetic, train_batch_size = batch_size ×
/// grad_accum_steps × world_size, as DeepSpeed does it: a micro batch or an
/// accumulation that no file set is derived from the other two (both unset:
/// accumulation 1); then the product must hold. Throws ConfigError with the
/// numbers. Nothing to do without a train_batch_size.
void apply_batch_arithmetic(ResolvedConfig& resolved, int64_t world_size);

/// What a resolution did, for `mpiaccel config --from`: every resulting key
/// with the place it came from, then the moot keys with their reasons.
std::string describe_resolution(const ResolvedConfig& resolved);

/// The user's default config, which `mpiaccel config` writes and `train`,
/// `launch` and run_main programs read when given no --config:
/// $XDG_CONFIG_HOME/mpiaccel/default.ini, or ~/.config/mpiaccel/default.ini
/// ("" when neither variable is set). From `env`, or the process environment.
std::string default_config_path(const std::map<std::string, std::string>& env);
std::string default_config_path();

/// One row of the key tables: how mpiaccel handles a key of a foreign format.
struct ConfigKeyRule {
  std::string format;    ///< config_format_name()
  std::string key;       ///< as in the file; "a.b" for a key b inside a
  std::string handling;  ///< mapped | moot | refused
  std::string note;      ///< the mpiaccel keys it sets, or why
};
/// Every row, grouped by format.
const std::vector<ConfigKeyRule>& config_key_rules();

}  // namespace mpiaccel
