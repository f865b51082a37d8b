// check_hf_config_text (see hf_architecture.hpp): the one place a
// config.json of a model directory is parsed and checked.

#include <string>

#include "interop/hf_architecture.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

void check_hf_config_text(const HfArchitecture& arch, const std::string& text, const ModelSpec& spec,
                          const std::string& where) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    MPIACCEL_THROW(where + " is not valid JSON: " + e.what());
  }
  MPIACCEL_CHECK(config.is_object(), where + " holds no JSON object: not a " + arch.hf_class + " config");
  try {
    arch.check_config(config, spec, where);
  } catch (const nlohmann::json::exception& e) {
    MPIACCEL_THROW(where + ": a value of another type than " + arch.hf_class + "'s config has (" + e.what() + ")");
  }
}

}  // namespace mpiaccel::detail
