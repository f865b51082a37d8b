#pragma once
// Setting one key from text, shared by the INI parser, the command-line
// overrides and Config::set, so all three validate and word errors alike.

#include <string>

#include "mpiaccel/config.hpp"

namespace mpiaccel::detail {

/// Sets section.key from INI text. Returns "" or the error without location:
/// "[section] key: what is wrong; accepted: ...".
std::string set_key(Config& config, const std::string& section, const std::string& key,
                    const std::string& value);

/// Applies one "section.key=value" override; throws ConfigError whose message
/// starts "<label> 'TEXT': " (label: "override" or "set").
void apply_assignment(Config& config, const std::string& assignment, const char* label);

}  // namespace mpiaccel::detail
