// Config's key access, defaults, equality and INI writer: all through the
// schema table, so none of them can miss a key.

#include "mpiaccel/config.hpp"

#include "config/config_access.hpp"
#include "config/schema.hpp"
#include "config/value_text.hpp"

namespace mpiaccel {
namespace detail {

std::string set_key(Config& config, const std::string& section, const std::string& key,
                    const std::string& value) {
  const KeySpec* spec = find_key(section, key);
  if (spec == nullptr) return unknown_name_message(section, key);
  std::string why = spec->set(config, value);
  if (why.empty()) return "";
  return "[" + section + "] " + key + ": " + why + "; accepted: " + spec->accepted;
}

void apply_assignment(Config& config, const std::string& assignment, const char* label) {
  const std::string where = std::string(label) + " '" + assignment + "': ";
  size_t equals = assignment.find('=');
  std::string dotted = trim(assignment.substr(0, equals));
  size_t dot = dotted.find('.');
  if (equals == std::string::npos || dot == std::string::npos || dot == 0 ||
      dot + 1 == dotted.size()) {
    throw ConfigError(where + "not of the form section.key=value (e.g. ddp.bucket_cap_mb=4)",
                      __FILE__, __LINE__);
  }
  std::string error = set_key(config, dotted.substr(0, dot), dotted.substr(dot + 1),
                              trim(assignment.substr(equals + 1)));
  if (!error.empty()) throw ConfigError(where + error, __FILE__, __LINE__);
}

namespace {

const KeySpec& spec_of(const std::string& dotted_key, const char* label) {
  size_t dot = dotted_key.find('.');
  const KeySpec* spec = nullptr;
  if (dot != std::string::npos) spec = find_key(dotted_key.substr(0, dot), dotted_key.substr(dot + 1));
  if (spec != nullptr) return *spec;
  std::string where = std::string(label) + " '" + dotted_key + "': ";
  if (dot == std::string::npos) {
    throw ConfigError(where + "not of the form section.key", __FILE__, __LINE__);
  }
  throw ConfigError(where + unknown_name_message(dotted_key.substr(0, dot), dotted_key.substr(dot + 1)),
                    __FILE__, __LINE__);
}

}  // namespace
}  // namespace detail

Config Config::defaults(const std::vector<std::string>& overrides) {
  Config config;
  for (const auto& o : overrides) detail::apply_assignment(config, o, "override");
  return config;
}

void Config::set(const std::string& dotted_key, const std::string& value) {
  detail::apply_assignment(*this, dotted_key + "=" + value, "set");
}

std::string Config::get(const std::string& dotted_key) const {
  return detail::spec_of(dotted_key, "get").get(*this);
}

std::string Config::to_ini() const {
  const Config defaults;
  std::string out =
      "; mpiaccel configuration, resolved: every section and key with its value.\n"
      "; Written by Config::to_ini(); docs/config.md describes each key.\n"
      "; A string in double quotes keeps leading/trailing spaces; ' ;' starts a comment.\n";
  std::string section;
  for (const auto& row : detail::schema()) {
    if (row.section != section) {
      section = row.section;
      out += "\n[" + section + "]\n";
    }
    std::string default_text = row.get(defaults);
    out += "; " + row.help + " (accepted: " + row.accepted +
           "; default: " + (default_text.empty() ? "\"\"" : default_text) + ")\n";
    std::string value = row.get(*this);
    out += row.key + " =" + (value.empty() ? "" : " " + value) + "\n";
  }
  return out;
}

bool operator==(const Config& a, const Config& b) {
  // The INI text is exact: floats print as the shortest text that reads back
  // to the same double, so equal text means equal values.
  for (const auto& row : detail::schema()) {
    if (row.get(a) != row.get(b)) return false;
  }
  return true;
}

const std::vector<ConfigKeyInfo>& config_schema() {
  static const std::vector<ConfigKeyInfo> info = [] {
    const Config defaults;
    std::vector<ConfigKeyInfo> out;
    for (const auto& row : detail::schema()) {
      out.push_back({row.section, row.key, row.type, row.get(defaults), row.accepted, row.help});
    }
    return out;
  }();
  return info;
}

}  // namespace mpiaccel
