// resolve_pretrained_config (see hf_pretrained.hpp).

#include "interop/hf_pretrained.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "interop/hf_architecture.hpp"
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

// [train] model from the file's family, unless the user chose another.
std::string take_family(ResolvedConfig& resolved, const HfArchitecture& arch, const std::string& where) {
  const std::string origin = origin_of(resolved, "train.model");
  const std::string& chosen = resolved.config.train.model;
  if (!origin.empty()) {
    MPIACCEL_CHECK(chosen == arch.kind, where + ": model_type " + arch.model_type + " is [train] model = " +
                                            arch.kind + ", but " + origin + " sets [train] model = " + chosen +
                                            ": set it to " + arch.kind + " or leave it out");
    return "";
  }
  resolved.config.set("train.model", arch.kind);
  return std::string("train.model = ") + arch.kind;
}

}  // namespace

std::string resolve_pretrained_config(ResolvedConfig& resolved, const std::string& text, const std::string& where) {
  const nlohmann::json theirs = parse_hf_config(text, where);
  const HfArchitecture& arch = hf_architecture_of(theirs, where);
  std::string taken = take_family(resolved, arch, where);
  std::vector<HfSetting> settings;
  try {
    settings = arch.settings(theirs, where);
  } catch (const nlohmann::json::exception& e) {
    MPIACCEL_THROW(where + ": a value of another type than " + arch.hf_class + "'s config has (" + e.what() + ")");
  }
  for (const HfSetting& s : settings) {
    if (!origin_of(resolved, s.key).empty()) continue;  // the user's: checked below
    try {
      resolved.config.set(s.key, s.value);
    } catch (const Error& e) {
      MPIACCEL_THROW(where + ": " + s.field + " = " + s.value + " cannot be " + s.key + ": " + e.message());
    }
    taken += (taken.empty() ? "" : ", ") + s.key + " = " + s.value;
  }
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
