#include "config/value_text.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstdlib>

namespace mpiaccel::detail {

std::string trim(const std::string& text) {
  const char* space = " \t\r\n\f\v";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(space);
  return text.substr(begin, end - begin + 1);
}

std::string lower(const std::string& text) {
  std::string out = text;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<bool> parse_bool(const std::string& text, std::string& why) {
  std::string t = lower(text);
  if (t == "true" || t == "yes" || t == "on" || t == "1") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return false;
  why = "'" + text + "' is not a bool";
  return std::nullopt;
}

std::optional<int64_t> parse_int(const std::string& text, std::string& why) {
  // strtoll alone would accept " 12", "12abc" (as 12) and "" (as 0).
  bool digits = !text.empty();
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool sign = (i == 0 && (c == '-' || c == '+') && text.size() > 1);
    if (!sign && (c < '0' || c > '9')) digits = false;
  }
  if (!digits) {
    why = "'" + text + "' is not an integer";
    return std::nullopt;
  }
  errno = 0;
  long long value = std::strtoll(text.c_str(), nullptr, 10);
  if (errno == ERANGE) {
    why = "'" + text + "' does not fit a 64-bit integer";
    return std::nullopt;
  }
  return static_cast<int64_t>(value);
}

std::optional<double> parse_float(const std::string& text, std::string& why) {
  char* end = nullptr;
  errno = 0;
  double value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
  bool whole = !text.empty() && end == text.c_str() + text.size() &&
               !std::isspace(static_cast<unsigned char>(text.front()));
  if (!whole) {
    why = "'" + text + "' is not a number";
    return std::nullopt;
  }
  if (!std::isfinite(value) || errno == ERANGE) {
    // ERANGE on underflow too: a value that rounds to 0 or inf is not what was meant.
    why = "'" + text + "' is not a finite number in double range";
    return std::nullopt;
  }
  return value;
}

std::string format_bool(bool value) { return value ? "true" : "false"; }

std::string format_float(double value) {
  char buffer[64];
  // Whole numbers read better without an exponent: timeout_s = 1800, not 1.8e+03.
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buffer, sizeof(buffer), "%.0f", value);
    return buffer;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

std::optional<std::string> unquote(const std::string& text, std::string& why) {
  if (text.empty() || text.front() != '"') return text;
  if (text.size() < 2 || text.back() != '"') {
    why = "the quote opened in '" + text +
          "' is not closed (a ' ;' inside quotes still starts a comment)";
    return std::nullopt;
  }
  return text.substr(1, text.size() - 2);
}

std::string quote_if_needed(const std::string& value) {
  bool needs = !value.empty() &&
               (value.front() == '"' || value.front() == ';' || trim(value) != value);
  return needs ? "\"" + value + "\"" : value;
}

std::string unwritable_reason(const std::string& value) {
  for (size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c == '\n' || c == '\r') return "text contains a line break";
    if (c < 0x20 && c != '\t') return "text contains a control character";
    if (c == ';' && i > 0 && std::isspace(static_cast<unsigned char>(value[i - 1]))) {
      return "text contains whitespace followed by ';', which INI reads as a comment";
    }
  }
  return "";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::optional<std::string> nearest(const std::string& word,
                                   const std::vector<std::string>& candidates) {
  // A third of the word's length (at least 1, at most 3) separates typos
  // from different words: "bucket_capmb" -> "bucket_cap_mb", not "lr" -> "eps".
  const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const std::string& candidate : candidates) {
    size_t distance = edit_distance(lower(word), lower(candidate));
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

// The index of the first byte of `text` that does not begin or continue a
// well-formed UTF-8 sequence (no overlongs, surrogates or code points past
// U+10FFFF), or npos.
size_t first_invalid_utf8(const std::string& text) {
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = b[i];
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c < 0x80) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
      if (b[i + k] < min || b[i + k] > max) return i;
    }
    i += len;
  }
  return std::string::npos;
}

}  // namespace mpiaccel::detail
