// Accelerate's YAML config files into leaves, with yaml-cpp (Debian's
// libyaml-cpp). Accelerate writes and reads these files with PyYAML, a YAML
// 1.1 reader, so plain scalars are resolved as PyYAML resolves them: yes/no
// and on/off are booleans too, ~ and null are null; quoted scalars are strings.

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "config/source_leaves.hpp"
#include "config/value_text.hpp"
#include "mpiaccel/config.hpp"

namespace mpiaccel::detail {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, int line, const std::string& what) {
  throw ConfigError(source + ":" + std::to_string(line) + ": " + what, __FILE__, __LINE__);
}

int line_of(const YAML::Node& node) { return node.Mark().line + 1; }

json plain_scalar(const std::string& text) {
  static const std::set<std::string> nulls{"", "~", "null", "Null", "NULL"};
  static const std::set<std::string> trues{"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const std::set<std::string> falses{"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  static const std::regex integer("[-+]?[0-9]+");
  static const std::regex real("[-+]?([0-9]*\\.[0-9]+|[0-9]+\\.?[0-9]*)([eE][-+]?[0-9]+)?");
  if (nulls.count(text)) return nullptr;
  if (trues.count(text)) return true;
  if (falses.count(text)) return false;
  if (std::regex_match(text, integer)) {
    errno = 0;
    const long long value = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == 0) return static_cast<int64_t>(value);
  }
  if (std::regex_match(text, real)) return std::strtod(text.c_str(), nullptr);
  return text;
}

// Aliases share nodes, so a small file can name a huge tree (a "billion
// laughs"): converting stops after kMaxValues values.
constexpr size_t kMaxValues = 100000;

json to_json(const YAML::Node& node, const std::string& source, int depth, size_t& budget) {
  if (budget-- == 0) {
    fail(source, line_of(node), "more than " + std::to_string(kMaxValues) +
                                    " values (aliases expanded); accepted: a config file");
  }
  if (depth > kMaxSourceDepth) {
    fail(source, line_of(node), "nested deeper than " + std::to_string(kMaxSourceDepth) +
                                    " levels; accepted: a config file");
  }
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return node.Tag() == "?" ? plain_scalar(node.Scalar()) : json(node.Scalar());
    case YAML::NodeType::Sequence: {
      json list = json::array();
      for (const auto& item : node) list.push_back(to_json(item, source, depth + 1, budget));
      return list;
    }
    case YAML::NodeType::Map: {
      json object = json::object();
      for (const auto& member : node) {
        object[member.first.as<std::string>()] = to_json(member.second, source, depth + 1, budget);
      }
      return object;
    }
    default:
      return nullptr;
  }
}

void flatten(const YAML::Node& map, const std::string& prefix, const std::string& source, int depth,
             size_t& budget, std::vector<SourceLeaf>& leaves) {
  if (depth > kMaxSourceDepth) {
    fail(source, line_of(map), "mappings nested deeper than " + std::to_string(kMaxSourceDepth) +
                                   " levels; accepted: a config file");
  }
  std::set<std::string> seen;
  for (const auto& member : map) {
    const YAML::Node& key = member.first;
    if (budget-- == 0) fail(source, line_of(key), "more than " + std::to_string(kMaxValues) + " values; accepted: a config file");
    if (!key.IsScalar()) fail(source, line_of(key), "a key that is not text; accepted: key: value");
    const std::string name = key.Scalar();
    if (!seen.insert(name).second) {
      fail(source, line_of(key), "key '" + name + "' appears twice in one mapping; accepted: each key once");
    }
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    if (member.second.IsMap() && member.second.size() > 0) {
      flatten(member.second, path, source, depth + 1, budget, leaves);
    } else {
      leaves.push_back({path, to_json(member.second, source, depth + 1, budget), line_of(key)});
    }
  }
}

}  // namespace

std::vector<SourceLeaf> read_yaml_leaves(const std::string& text, const std::string& source) {
  if (const size_t bad = first_invalid_utf8(text); bad != std::string::npos) {
    int line = 1;
    for (size_t i = 0; i < bad; ++i) line += text[i] == '\n';
    fail(source, line, "a byte that is not UTF-8; accepted: UTF-8 text (save the file as UTF-8)");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(source, e.mark.line + 1, "YAML syntax error: " + e.msg + "; accepted: key: value lines");
  }
  std::vector<SourceLeaf> leaves;
  if (root.IsNull()) return leaves;  // an empty file sets nothing
  if (!root.IsMap()) fail(source, line_of(root), "the top level is not a mapping; accepted: key: value lines");
  try {
    size_t budget = kMaxValues;
    flatten(root, "", source, 1, budget, leaves);
  } catch (const YAML::Exception& e) {
    fail(source, e.mark.line + 1, "YAML error: " + e.msg);
  }
  return leaves;
}

}  // namespace mpiaccel::detail
