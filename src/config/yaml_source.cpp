// Accelerate's YAML config files into leaves, with yaml-cpp (Debian's
// libyaml-cpp). Accelerate writes and reads these files with PyYAML, a YAML
// 1.1 reader, so plain scalars are resolved as PyYAML resolves them: yes/no
// and on/off are booleans too, ~ and null are null, 017 is octal and 1_000 an
// integer, a float needs a dot; quoted scalars are strings.

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cctype>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/source_leaves.hpp"
#include "config/value_text.hpp"
#include "mpiaccel/config.hpp"

namespace mpiaccel::detail {
namespace {

using nlohmann::json;

int line_of(const YAML::Node& node) { return node.Mark().line + 1; }

// PyYAML's int: 0b101, 017 (octal), 0x1f, 1_000 (no sexagesimal).
std::optional<int64_t> pyyaml_int(const std::string& text) {
  std::string digits;
  for (char c : text) {
    if (c != '_') digits += c;
  }
  size_t at = !digits.empty() && (digits[0] == '-' || digits[0] == '+') ? 1 : 0;
  if (at >= digits.size() || !std::isdigit(static_cast<unsigned char>(digits[at]))) return std::nullopt;
  int base = 10;
  if (digits.compare(at, 2, "0b") == 0) base = 2, at += 2;
  else if (digits.compare(at, 2, "0x") == 0) base = 16, at += 2;
  else if (digits[at] == '0' && digits.size() > at + 1) base = 8, at += 1;
  if (at >= digits.size() || digits[at] == '-' || digits[at] == '+') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(digits.c_str() + at, &end, base);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return digits[0] == '-' ? -value : value;
}

// PyYAML's float: a dot is required (1.5, .5, 1.e3, 1.5e-4; a signed
// exponent), or .inf / .nan. "1e-4" is text to PyYAML, and to us.
std::optional<double> pyyaml_float(const std::string& text) {
  static const std::set<std::string> inf{".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"};
  static const std::set<std::string> nan{".nan", ".NaN", ".NAN"};
  if (inf.count(text)) return std::numeric_limits<double>::infinity();
  if (text == "-.inf" || text == "-.Inf" || text == "-.INF") return -std::numeric_limits<double>::infinity();
  if (nan.count(text)) return std::numeric_limits<double>::quiet_NaN();
  std::string digits;
  for (char c : text) {
    if (c != '_') digits += c;
  }
  const size_t dot = digits.find('.');
  const size_t exponent = digits.find_first_of("eE");
  if (dot == std::string::npos || (exponent != std::string::npos && exponent < dot)) return std::nullopt;
  if (exponent != std::string::npos && (exponent + 1 >= digits.size() || (digits[exponent + 1] != '-' && digits[exponent + 1] != '+'))) {
    return std::nullopt;
  }
  char* end = nullptr;
  const double value = std::strtod(digits.c_str(), &end);
  if (*end != '\0' || digits == "." || digits.find_first_of("0123456789") == std::string::npos) return std::nullopt;
  return value;
}

json plain_scalar(const std::string& text) {
  static const std::set<std::string> nulls{"", "~", "null", "Null", "NULL"};
  static const std::set<std::string> trues{"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const std::set<std::string> falses{"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  if (nulls.count(text)) return nullptr;
  if (trues.count(text)) return true;
  if (falses.count(text)) return false;
  if (text.size() > 64) return text;  // no number is written that long
  if (const auto value = pyyaml_int(text)) return *value;
  if (const auto value = pyyaml_float(text)) return *value;
  return text;
}

// Aliases share nodes, so a small file can name a huge tree (a "billion
// laughs"): converting stops after kMaxValues values.
constexpr size_t kMaxValues = 100000;

json to_json(const YAML::Node& node, const std::string& source, int depth, size_t& budget) {
  if (budget-- == 0) {
    fail_at(source, line_of(node), "more than " + std::to_string(kMaxValues) +
                                    " values (aliases expanded); accepted: a config file");
  }
  if (depth > kMaxSourceDepth) {
    fail_at(source, line_of(node), "nested deeper than " + std::to_string(kMaxSourceDepth) +
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
    fail_at(source, line_of(map), "mappings nested deeper than " + std::to_string(kMaxSourceDepth) +
                                   " levels; accepted: a config file");
  }
  std::set<std::string> seen;
  for (const auto& member : map) {
    const YAML::Node& key = member.first;
    if (budget-- == 0) fail_at(source, line_of(key), "more than " + std::to_string(kMaxValues) + " values; accepted: a config file");
    if (!key.IsScalar()) fail_at(source, line_of(key), "a key that is not text; accepted: key: value");
    const std::string name = key.Scalar();
    if (!seen.insert(name).second) {
      fail_at(source, line_of(key), "key '" + name + "' appears twice in one mapping; accepted: each key once");
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
    fail_at(source, line_of_byte(text, bad), "a byte that is not UTF-8; accepted: UTF-8 text (save the file as UTF-8)");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail_at(source, e.mark.line + 1, "YAML syntax error: " + e.msg + "; accepted: key: value lines");
  }
  std::vector<SourceLeaf> leaves;
  if (root.IsNull()) return leaves;  // an empty file sets nothing
  if (!root.IsMap()) fail_at(source, line_of(root), "the top level is not a mapping; accepted: key: value lines");
  try {
    size_t budget = kMaxValues;
    flatten(root, "", source, 1, budget, leaves);
  } catch (const YAML::Exception& e) {
    fail_at(source, e.mark.line + 1, "YAML error: " + e.msg);
  }
  return leaves;
}

}  // namespace mpiaccel::detail
