// The family a config.json describes, parse_hf_config and
// check_hf_config_text (see hf_architecture.hpp): the one place a
// config.json of a model directory is parsed and checked. Registry-free
// (family_registry.cpp has the overloads over every family), so the fuzz
// harness links the architectures alone.

#include "models/hf_architecture.hpp"

#include <string>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

const ModelFamily& hf_family_of(const nlohmann::json& theirs, const std::string& where,
                                const std::vector<const ModelFamily*>& families) {
  const nlohmann::json type = theirs.value("model_type", nlohmann::json());
  const nlohmann::json classes = theirs.value("architectures", nlohmann::json::array());
  std::string known;
  for (const ModelFamily* family : families) {
    const HfArchitecture* arch = family->hf;
    if (arch == nullptr) continue;
    if (type.is_string() && type.get<std::string>() == arch->model_type) return *family;
    if (type.is_null() && classes.is_array())
      for (const nlohmann::json& c : classes)
        if (c.is_string() && c.get<std::string>() == arch->hf_class) return *family;
    known += std::string(known.empty() ? "" : ", ") + arch->model_type + " (" + arch->hf_class +
             ", [train] model = " + family->name + ")";
  }
  MPIACCEL_THROW(where + ": model_type " + type.dump() + " (architectures " + classes.dump() +
                 ") is no model family here; init_from reads " + known);
}

nlohmann::json parse_hf_config(const std::string& text, const std::string& where) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    MPIACCEL_THROW(where + " is not valid JSON: " + e.what());
  }
  MPIACCEL_CHECK(config.is_object(), where + " holds no JSON object: not a model's config.json");
  return config;
}

void check_hf_config_text(const HfArchitecture& arch, const std::string& text, const ModelSpec& spec,
                          const std::string& where) {
  const nlohmann::json config = parse_hf_config(text, where);
  try {
    arch.check_config(config, spec, where);
  } catch (const nlohmann::json::exception& e) {
    MPIACCEL_THROW(where + ": a value of another type than " + arch.hf_class + "'s config has (" + e.what() + ")");
  }
}

}  // namespace mpiaccel::detail
