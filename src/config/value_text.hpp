#pragma once
// The text form of config values: how a bool, an integer, a float or a string
// is read from and written to INI, and the edit distance behind "did you mean".
// Every reader returns an empty optional and sets `why` when the text is bad.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mpiaccel::detail {

/// The longest line we accept. inih 55 reads lines into a 200-byte buffer and
/// silently splits longer ones, so we refuse them instead.
constexpr size_t kMaxIniLine = 199;

std::string trim(const std::string& text);
std::string lower(const std::string& text);

std::optional<bool> parse_bool(const std::string& text, std::string& why);
std::optional<int64_t> parse_int(const std::string& text, std::string& why);
std::optional<double> parse_float(const std::string& text, std::string& why);

/// "true"/"false".
std::string format_bool(bool value);
/// The shortest decimal text that reads back to exactly `value`.
std::string format_float(double value);

/// Removes one pair of enclosing double quotes (they keep leading/trailing
/// spaces or a leading ';'). A value that opens a quote it does not close fails.
std::optional<std::string> unquote(const std::string& text, std::string& why);
/// The INI text of a string: quoted when unquote() would otherwise change it.
std::string quote_if_needed(const std::string& value);
/// Empty when `value` can be written to INI and read back unchanged; otherwise
/// why not (a line break, or whitespace before ';' which INI reads as a comment).
std::string unwritable_reason(const std::string& value);

/// The index of the first byte of `text` that does not begin or continue a
/// well-formed UTF-8 sequence, or npos.
size_t first_invalid_utf8(const std::string& text);

/// Damerau-Levenshtein (optimal string alignment) distance.
size_t edit_distance(const std::string& a, const std::string& b);
/// The candidate nearest to `word`, if it is close enough to be a likely typo.
std::optional<std::string> nearest(const std::string& word,
                                   const std::vector<std::string>& candidates);

}  // namespace mpiaccel::detail
