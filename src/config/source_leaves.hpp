#pragma once
// A foreign config file (Accelerate YAML, DeepSpeed or Trainer JSON) as a flat
// list of leaves, in file order: "zero_optimization.offload_optimizer.device"
// = "cpu" at line 7. Nested mappings flatten into dotted paths; a list, a
// scalar or an empty mapping is a leaf. YAML's plain scalars are resolved as
// PyYAML (Accelerate's reader) resolves them (true, 4, 1_000, 0x10, 1.5e-4,
// null), so both formats give JSON values to the key tables.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpiaccel::detail {

struct SourceLeaf {
  std::string path;
  nlohmann::json value;
  int line = 0;
};

/// Mappings (and JSON brackets) nested deeper than this are refused (no
/// config format nests beyond four levels; a bound keeps hostile files from
/// exhausting the stack).
constexpr int kMaxSourceDepth = 32;

/// Throw ConfigError "SOURCE:LINE: ..." for a syntax error, a top level that
/// is not a mapping, a duplicate key or nesting deeper than kMaxSourceDepth.
std::vector<SourceLeaf> read_yaml_leaves(const std::string& text, const std::string& source);
std::vector<SourceLeaf> read_json_leaves(const std::string& text, const std::string& source);

/// Throws ConfigError "SOURCE:LINE: WHAT".
[[noreturn]] void fail_at(const std::string& source, int line, const std::string& what);
/// The 1-based line of byte `byte` of `text`.
int line_of_byte(const std::string& text, size_t byte);

/// A leaf value as a setting's text: a string as it is, a list as its items
/// joined by ", ", anything else as JSON.
std::string leaf_text(const nlohmann::json& value);
/// `value` as JSON text; bytes that are not UTF-8 become U+FFFD.
std::string json_text(const nlohmann::json& value);

}  // namespace mpiaccel::detail
