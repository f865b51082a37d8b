#pragma once
// The config schema: one row per key, built once in schema.cpp. Everything that
// reads or writes a Config (INI parsing, overrides, get/set, to_ini, ==, the
// docs table) goes through these rows, so a key added here is complete.

#include <functional>
#include <string>
#include <vector>

#include "mpiaccel/config.hpp"

namespace mpiaccel::detail {

struct KeySpec {
  std::string section;
  std::string key;
  std::string type;      ///< bool | int | float | string | choice | float_pair
  std::string accepted;  ///< human text: "no|ddp|fsdp|zero", ">= 1", "any text"
  std::string help;      ///< one line
  std::vector<std::string> choices;  ///< for type choice
  /// The INI text of this key's value in `config` (set(get()) is the identity).
  std::function<std::string(const Config&)> get;
  /// Reads INI text into `config`; returns "" or what is wrong with the text
  /// (the caller adds where and the accepted values).
  std::function<std::string(Config&, const std::string&)> set;
};

/// Every row, sections in file order, keys in struct order.
const std::vector<KeySpec>& schema();
/// Section names in file order.
const std::vector<std::string>& schema_sections();
/// The row of section.key, or nullptr.
const KeySpec* find_key(const std::string& section, const std::string& key);
/// Key names of one section, in order.
std::vector<std::string> section_keys(const std::string& section);

/// "[section] key: what; accepted: ..." for an unknown key or section
/// (key empty: the section itself), with the nearest valid name suggested.
std::string unknown_name_message(const std::string& section, const std::string& key);

}  // namespace mpiaccel::detail
