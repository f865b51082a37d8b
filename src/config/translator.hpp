#pragma once
// Translating one foreign config file: its leaves go through a table of key
// rules (one table per format); a rule maps a leaf onto mpiaccel settings,
// calls it moot with the reason, or refuses it with one line naming
// file:line, the key and what to do instead.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <utility>
#include <string>
#include <vector>

#include "config/source_leaves.hpp"
#include "mpiaccel/config_files.hpp"

namespace mpiaccel::detail {

/// What one file says, before it is combined with the others.
struct Translation {
  std::vector<ConfigSetting> settings;
  /// Settings from a key left at its producer's default (a TrainingArguments
  /// field the user did not change): used when no file sets the key, never a
  /// conflict.
  std::vector<ConfigSetting> weak_settings;
  std::vector<ConfigMootKey> moot;
  int64_t train_batch_size = 0;
  std::string train_batch_size_origin;
  /// A DeepSpeed warmup that is logarithmic if it is longer than 0 steps, its
  /// length "auto": refused once the combined config says > 0.
  std::string log_warmup_origin;
};

class Translator {
 public:
  Translator(std::string source, std::string format, std::vector<SourceLeaf> leaves);

  /// Sets mpiaccel's `key` (section.key) to `value` because of `leaf`.
  void set(const SourceLeaf& leaf, const std::string& key, const std::string& value);
  /// A weak setting whatever the mode: what the producer does by default.
  void set_default(const SourceLeaf& leaf, const std::string& key, const std::string& value);
  /// Records why `leaf` needs nothing (not while weak: a default says nothing).
  void moot(const SourceLeaf& leaf, const std::string& reason);
  [[noreturn]] void refuse(const SourceLeaf& leaf, const std::string& why) const;

  /// The leaf's value as a bool, an integer, a number or text; refuses a value
  /// of another type. Accelerate and the Trainer also write "true"/"false".
  bool boolean(const SourceLeaf& leaf) const;
  int64_t integer(const SourceLeaf& leaf) const;
  double number(const SourceLeaf& leaf) const;
  std::string text(const SourceLeaf& leaf) const;
  /// DeepSpeed's and the Trainer's "auto": the value comes from elsewhere.
  static bool is_auto(const SourceLeaf& leaf);

  /// Another leaf of the same file (nullptr if absent).
  const SourceLeaf* find(const std::string& path) const;
  const std::vector<SourceLeaf>& leaves() const { return leaves_; }
  const std::string& source() const { return source_; }
  std::string origin(const SourceLeaf& leaf) const;

  /// While true, set() records weak settings (a producer's default).
  void set_weak(bool weak) { weak_ = weak; }
  bool weak() const { return weak_; }
  Translation& result() { return result_; }

 private:
  std::string source_;
  std::string format_;
  std::vector<SourceLeaf> leaves_;
  bool weak_ = false;
  Translation result_;
};

/// One row of a format's table. `key` is a leaf path, or "prefix.*" for every
/// key under prefix. A row without `apply` is moot (or refused) with `note`
/// as the reason; `harmless` lists values (JSON text) that are moot even on
/// a refused row ("false", "null", "\"NO\"").
struct KeyRule {
  KeyRule(std::string key_, std::string handling_, std::string note_,
          std::function<void(Translator&, const SourceLeaf&)> apply_ = {}, std::vector<std::string> harmless_ = {})
      : key(std::move(key_)),
        handling(std::move(handling_)),
        note(std::move(note_)),
        apply(std::move(apply_)),
        harmless(std::move(harmless_)) {}

  std::string key;
  std::string handling;  ///< mapped | moot | refused
  std::string note;
  std::function<void(Translator&, const SourceLeaf&)> apply;
  std::vector<std::string> harmless;
};

using Apply = std::function<void(Translator&, const SourceLeaf&)>;
/// Rules that set one mpiaccel key from the leaf's value, checked for type.
Apply to_flag(const std::string& key);
Apply to_integer(const std::string& key);
Apply to_number(const std::string& key);
Apply to_text(const std::string& key);
/// Sets `key` to the mpiaccel value of the file's value (pairs: file value,
/// mpiaccel value); another value is refused, naming the accepted ones.
Apply to_choice(const std::string& key, const std::vector<std::pair<std::string, std::string>>& values);

/// The tables' groups of rows, in order, as one table.
std::vector<KeyRule> join_rules(std::initializer_list<std::vector<KeyRule>> groups);

/// The row for `path` (exact rows before "prefix.*" rows), or nullptr.
const KeyRule* find_rule(const std::vector<KeyRule>& table, const std::string& path);

/// Applies the table's row to every leaf; a leaf without a row is refused as
/// unknown to `format`.
void apply_rules(Translator& translator, const std::vector<KeyRule>& table);
/// Applies the table's row for `rule_path` (the leaf's path within its
/// section) to one leaf; a leaf without a row is refused as unknown.
void apply_rule(Translator& translator, const std::vector<KeyRule>& table, const SourceLeaf& leaf,
                const std::string& rule_path);

// The formats' tables (one file each).
const std::vector<KeyRule>& accelerate_yaml_rules();
const std::vector<KeyRule>& deepspeed_json_rules();
const std::vector<KeyRule>& trainer_fsdp_rules();
const std::vector<KeyRule>& training_arguments_rules();

// The formats' translations: a file's leaves into settings.
Translation translate_accelerate_yaml(const std::string& source, std::vector<SourceLeaf> leaves);
Translation translate_deepspeed_json(const std::string& source, std::vector<SourceLeaf> leaves);
Translation translate_trainer_fsdp(const std::string& source, std::vector<SourceLeaf> leaves);
Translation translate_training_arguments(const std::string& source, std::vector<SourceLeaf> leaves);

/// The DeepSpeed table applied to the leaves under `prefix` of a
/// TrainingArguments file ("deepspeed": {...} inline).
void translate_deepspeed_section(Translator& translator, const std::string& prefix);
/// The Trainer's fsdp_config table applied to the leaves under `prefix`.
void translate_fsdp_section(Translator& translator, const std::string& prefix);

}  // namespace mpiaccel::detail
