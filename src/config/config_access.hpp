#pragma once
// Setting one key from text, shared by the INI parser, the command-line
// overrides and Config::set, so all three validate and word errors alike.

#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/config.hpp"

namespace mpiaccel::detail {

/// Sets section.key from INI text. Returns "" or the error without location:
/// "[section] key: what is wrong; accepted: ...".
std::string set_key(Config& config, const std::string& section, const std::string& key,
                    const std::string& value);

/// Parses INI text into `config` (keys not given keep their values) and
/// returns the keys the text set ("section.key") with their lines, in file
/// order. Throws ConfigError "SOURCE:LINE: ...".
std::vector<std::pair<std::string, int>> parse_ini(const std::string& text, const std::string& source,
                                                   Config& config);

/// Applies one "section.key=value" override; throws ConfigError whose message
/// starts "<label> 'TEXT': " (label: "override" or "set").
void apply_assignment(Config& config, const std::string& assignment, const char* label);

}  // namespace mpiaccel::detail
