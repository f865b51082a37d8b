// resolve_pretrained_config (see hf_pretrained.hpp).

#include "interop/hf_pretrained.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "models/hf_architecture.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// Where `key` was set ("job.ini:7"), or "" when no file or override set it.
std::string origin_of(const ResolvedConfig& resolved, const std::string& key) {
  std::string origin;
  for (const ConfigSetting& s : resolved.settings)
    if (s.key == key) origin = s.origin;
  return origin;
}

// [train] model from the file's family, unless the user chose it: then ""
// when it is the file's, else the disagreement. `taken` gets what was set.
std::string take_family(ResolvedConfig& resolved, const ModelFamily& family, std::string* taken) {
  const std::string origin = origin_of(resolved, "train.model");
  const std::string& chosen = resolved.config.train.model;
  if (origin.empty()) {
    resolved.config.set("train.model", family.name);
    *taken = std::string("train.model = ") + family.name;
    return "";
  }
  if (chosen == family.name) return "";
  return std::string("model_type ") + family.hf->model_type + " is [train] model = " + family.name + ", but " +
         origin + " sets [train] model = " + chosen;
}

// `s` set in `config`, or an Error naming the file's field when our key
// cannot hold its value.
void set_from_file(Config& config, const HfSetting& s, const std::string& where) {
  try {
    config.set(s.key, s.value);
  } catch (const Error& e) {
    MPIACCEL_THROW(where + ": " + s.field + " = " + s.value + " cannot be " + s.key + ": " + e.message());
  }
}

// What the model builds from `key`, where 0 means "derived from the other
// sizes" (the Llama's n_kv_head, head_dim, intermediate_size): a user's 0 and
// the file's explicit value agree when they build the same model.
std::string built_value(const Config& config, const std::string& key) {
  const ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
  if (key == "model.n_kv_head") return std::to_string(spec.kv_heads());
  if (key == "model.head_dim") return std::to_string(spec.head_width());
  if (key == "model.intermediate_size") return std::to_string(spec.swiglu_width());
  return config.get(key);
}

// "" when the user's `s.key` (set at `origin`) builds what the file's value
// does; else the disagreement, in the words of the family's own check.
std::string disagreement(const Config& config, const HfSetting& s, const std::string& origin,
                         const std::string& where) {
  Config theirs = config;
  set_from_file(theirs, s, where);
  if (built_value(theirs, s.key) == built_value(config, s.key)) return "";
  const size_t dot = s.key.find('.');
  return s.field + " = " + s.value + " but [" + s.key.substr(0, dot) + "] " + s.key.substr(dot + 1) + " gives " +
         config.get(s.key) + " (" + origin + ")";
}

}  // namespace

std::string resolve_pretrained_config(ResolvedConfig& resolved, const std::string& text, const std::string& where) {
  const nlohmann::json theirs = parse_hf_config(text, where);
  const ModelFamily& chosen = hf_family_of(theirs, where);
  const HfArchitecture& arch = *chosen.hf;
  std::string taken;
  const std::string family = take_family(resolved, chosen, &taken);
  std::vector<HfSetting> settings;
  try {
    settings = arch.settings(theirs, where);
  } catch (const nlohmann::json::exception& e) {
    MPIACCEL_THROW(where + ": a value of another type than " + arch.hf_class + "'s config has (" + e.what() + ")");
  }
  for (const HfSetting& s : settings) {
    if (!origin_of(resolved, s.key).empty()) continue;  // the user's: compared below
    set_from_file(resolved.config, s, where);
    taken += (taken.empty() ? "" : ", ") + s.key + " = " + s.value;
  }
  // Every key the user set that disagrees, in one line (a config file that
  // sets every key must not cost one run per key); one is named as the
  // family's check names it on load.
  std::vector<std::string> disagreements;
  if (!family.empty()) disagreements.push_back(family);
  for (const HfSetting& s : settings) {
    const std::string origin = origin_of(resolved, s.key);
    if (origin.empty()) continue;
    const std::string why = disagreement(resolved.config, s, origin, where);
    if (!why.empty()) disagreements.push_back(why);
  }
  if (disagreements.size() > 1) {
    std::string all;
    for (const std::string& d : disagreements) all += (all.empty() ? "" : "; ") + d;
    MPIACCEL_THROW(where + ": " + all + ": leave these keys out to take the file's values, or set them to the file's");
  }
  MPIACCEL_CHECK(family.empty(), where + ": " + family + ": set it to " + std::string(chosen.name) + " or leave it out");
  const Config& config = resolved.config;
  check_hf_config_text(arch, text, ModelSpec::from(config.model, config.train.seq_len), where);
  return taken;
}

bool read_pretrained_config(const std::string& init_from, std::string* path, std::string* text) {
  if (init_from.empty() || !std::filesystem::is_directory(init_from)) return false;
  const std::filesystem::path file = std::filesystem::path(init_from) / "config.json";
  if (!std::filesystem::exists(file)) return false;
  std::ifstream in(file);
  *text = std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  MPIACCEL_CHECK(in.good() || in.eof(), "[model] init_from: cannot read " + file.string());
  *path = file.string();
  return true;
}

}  // namespace mpiaccel::detail
