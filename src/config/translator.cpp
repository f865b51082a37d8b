// The key-rule machinery shared by every foreign format.

#include "config/translator.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "config/value_text.hpp"

namespace mpiaccel::detail {

Translator::Translator(std::string source, std::string format, std::vector<SourceLeaf> leaves)
    : source_(std::move(source)), format_(std::move(format)), leaves_(std::move(leaves)) {}

std::string Translator::origin(const SourceLeaf& leaf) const {
  return source_ + ":" + std::to_string(leaf.line);
}

void Translator::set(const SourceLeaf& leaf, const std::string& key, const std::string& value) {
  auto& into = weak_ ? result_.weak_settings : result_.settings;
  into.push_back({key, value, origin(leaf), leaf.path});
}

void Translator::set_default(const SourceLeaf& leaf, const std::string& key, const std::string& value) {
  result_.weak_settings.push_back({key, value, origin(leaf), leaf.path});
}

void Translator::moot(const SourceLeaf& leaf, const std::string& reason) {
  if (weak_) return;
  result_.moot.push_back({origin(leaf), leaf.path, reason});
}

namespace {

// A key as one line: control characters (a newline in a quoted key) escaped.
std::string printable(const std::string& key) {
  std::string out;
  for (const char c : key) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
    else out += "\\x" + std::string(1, "0123456789abcdef"[(c >> 4) & 15]) + "0123456789abcdef"[c & 15];
  }
  return out;
}

}  // namespace

void Translator::refuse(const SourceLeaf& leaf, const std::string& why) const {
  throw ConfigError(origin(leaf) + ": " + printable(leaf.path) + " = " + json_text(leaf.value) + ": " + why,
                    __FILE__, __LINE__);
}

bool Translator::boolean(const SourceLeaf& leaf) const {
  if (leaf.value.is_boolean()) return leaf.value.get<bool>();
  if (leaf.value.is_string()) {
    const std::string text = leaf.value.get<std::string>();
    if (text == "true" || text == "True") return true;
    if (text == "false" || text == "False") return false;
  }
  refuse(leaf, "not a boolean; accepted: true or false");
}

int64_t Translator::integer(const SourceLeaf& leaf) const {
  if (leaf.value.is_number_unsigned() && leaf.value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    refuse(leaf, "out of range; accepted: a whole number below 2^63");
  }
  if (leaf.value.is_number_integer()) return leaf.value.get<int64_t>();
  if (leaf.value.is_number_float()) {
    const double value = leaf.value.get<double>();
    if (value == static_cast<double>(static_cast<int64_t>(value)) && value > -9e18 && value < 9e18) {
      return static_cast<int64_t>(value);
    }
  }
  refuse(leaf, "not an integer; accepted: a whole number");
}

// Also a number written as text ("1e-4", which PyYAML reads as a string).
double Translator::number(const SourceLeaf& leaf) const {
  if (leaf.value.is_number()) return leaf.value.get<double>();
  if (leaf.value.is_string()) {
    const std::string text = leaf.value.get<std::string>();
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (!text.empty() && *end == '\0' && std::isfinite(value)) return value;
  }
  refuse(leaf, "not a number; accepted: a number");
}

std::string Translator::text(const SourceLeaf& leaf) const {
  if (leaf.value.is_string() || leaf.value.is_number() || leaf.value.is_boolean()) return leaf_text(leaf.value);
  refuse(leaf, "not a single value; accepted: text or a number");
}

bool Translator::is_auto(const SourceLeaf& leaf) {
  return leaf.value.is_string() && leaf.value.get<std::string>() == "auto";
}

const SourceLeaf* Translator::find(const std::string& path) const {
  for (const auto& leaf : leaves_) {
    if (leaf.path == path) return &leaf;
  }
  return nullptr;
}

Apply to_flag(const std::string& key) {
  return [key](Translator& t, const SourceLeaf& leaf) { t.set(leaf, key, t.boolean(leaf) ? "true" : "false"); };
}

Apply to_integer(const std::string& key) {
  return [key](Translator& t, const SourceLeaf& leaf) { t.set(leaf, key, std::to_string(t.integer(leaf))); };
}

Apply to_number(const std::string& key) {
  return [key](Translator& t, const SourceLeaf& leaf) { t.set(leaf, key, leaf_text(t.number(leaf))); };
}

Apply to_text(const std::string& key) {
  return [key](Translator& t, const SourceLeaf& leaf) { t.set(leaf, key, t.text(leaf)); };
}

Apply to_choice(const std::string& key, const std::vector<std::pair<std::string, std::string>>& values) {
  return [key, values](Translator& t, const SourceLeaf& leaf) {
    // Case aside, as Accelerate's enums and the Trainer (which upper-cases
    // backward_prefetch) read them.
    const std::string given = lower(t.text(leaf));
    std::string accepted;
    for (const auto& [file_value, ours] : values) {
      if (lower(file_value) == given) return t.set(leaf, key, ours);
      accepted += (accepted.empty() ? "" : "|") + file_value;
    }
    t.refuse(leaf, "not a value mpiaccel supports; accepted: " + accepted);
  };
}

std::vector<KeyRule> join_rules(std::initializer_list<std::vector<KeyRule>> groups) {
  std::vector<KeyRule> rules;
  for (const auto& group : groups) rules.insert(rules.end(), group.begin(), group.end());
  return rules;
}

const KeyRule* find_rule(const std::vector<KeyRule>& table, const std::string& path) {
  for (const auto& rule : table) {
    if (rule.key == path) return &rule;
  }
  const KeyRule* best = nullptr;  // the longest matching "prefix.*"
  for (const auto& rule : table) {
    const size_t star = rule.key.size() >= 2 ? rule.key.size() - 1 : std::string::npos;
    if (star == std::string::npos || rule.key.compare(star - 1, 2, ".*") != 0) continue;
    const std::string prefix = rule.key.substr(0, star);  // "a."
    if (path.compare(0, prefix.size(), prefix) == 0 && (!best || prefix.size() + 1 > best->key.size())) {
      best = &rule;
    }
  }
  return best;
}

void apply_rule(Translator& translator, const std::vector<KeyRule>& table, const SourceLeaf& leaf,
                const std::string& rule_path) {
  const KeyRule* rule = find_rule(table, rule_path);
  if (rule == nullptr) {
    translator.refuse(leaf, "not a key mpiaccel knows in this format; accepted: the keys of "
                            "docs/config.md, \"Config files from Accelerate, DeepSpeed and the Trainer\"");
  }
  if (rule->apply && Translator::is_auto(leaf)) {
    translator.moot(leaf, "\"auto\": the value of the other files, or mpiaccel's default");
    return;
  }
  if (rule->apply) {
    rule->apply(translator, leaf);
    return;
  }
  bool harmless = rule->handling == "moot";
  for (const auto& value : rule->harmless) harmless |= nlohmann::json::parse(value) == leaf.value;
  if (!harmless) translator.refuse(leaf, rule->note);
  translator.moot(leaf, rule->handling == "moot" ? rule->note : "this value asks for nothing (" + rule->note + ")");
}

void apply_rules(Translator& translator, const std::vector<KeyRule>& table) {
  for (const auto& leaf : translator.leaves()) apply_rule(translator, table, leaf, leaf.path);
}

}  // namespace mpiaccel::detail
