// Config::parse and Config::load_file: INI text through inih into a Config.
//
// inih 55 (Debian's prebuilt library) gives the handler no line number, joins
// nothing but hands duplicate keys over again, treats an indented line after a
// key as its continuation, and splits lines longer than its 200-byte buffer
// without a word. So we feed it through our own line reader
// (ini_parse_stream): the reader counts lines, so a handler call belongs to
// the line read last; it refuses overlong lines itself; and it strips leading
// whitespace so no line is ever a continuation (an indented stray word is then
// a syntax error instead of silently joining the previous value).

#include <ini.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/config_access.hpp"
#include "config/schema.hpp"
#include "config/value_text.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/config_files.hpp"

namespace mpiaccel {
namespace {

struct ParseState {
  ParseState(const std::string& t, const std::string& s, Config& c)
      : text(t), source(s), config(c) {}

  const std::string& text;
  const std::string& source;
  Config& config;
  size_t offset = 0;
  int line = 0;             ///< number of the line handed to inih last
  std::string section;      ///< as the reader saw it, for overlong-line messages
  std::map<std::pair<std::string, std::string>, int> first_line;  ///< duplicate check
  int error_line = 0;       ///< the earliest error wins; 0 = none
  std::string error;

  void fail(int at, const std::string& message) {
    if (error_line == 0 || at < error_line) {
      error_line = at;
      error = source + ":" + std::to_string(at) + ": " + message;
    }
  }
};

// inih's rule: ';' starts a comment only after whitespace.
size_t find_or_comment(const std::string& s, size_t from, const char* chars) {
  bool was_space = false;
  for (size_t i = from; i < s.size(); ++i) {
    if (std::strchr(chars, s[i]) != nullptr || (was_space && s[i] == ';')) return i;
    was_space = std::isspace(static_cast<unsigned char>(s[i])) != 0;
  }
  return std::string::npos;
}

std::string line_at(const std::string& text, int number) {
  size_t begin = 0;
  for (int i = 1; i < number && begin != std::string::npos; ++i) {
    begin = text.find('\n', begin);
    if (begin != std::string::npos) ++begin;
  }
  if (begin == std::string::npos) return "";
  size_t end = text.find('\n', begin);
  return detail::trim(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
}

void check_section_header(ParseState& st, const std::string& line) {
  size_t close = find_or_comment(line, 1, "]");
  if (close == std::string::npos || line[close] != ']') return;  // inih reports the syntax error
  st.section = line.substr(1, close - 1);
  if (detail::section_keys(st.section).empty()) {
    st.fail(st.line, detail::unknown_name_message(st.section, ""));
  }
}

void report_overlong(ParseState& st, const std::string& line) {
  std::string where = st.section.empty() ? "" : "[" + st.section + "]";
  std::string content = detail::trim(line);
  bool comment = !content.empty() && (content[0] == ';' || content[0] == '#');
  size_t equals = content.find_first_of("=:");
  if (!content.empty() && !comment && content[0] != '[' && equals != std::string::npos) {
    where += (where.empty() ? "" : " ") + detail::trim(content.substr(0, equals));
  }
  st.fail(st.line, (where.empty() ? "" : where + ": ") + "line is " +
                       std::to_string(line.size()) + " characters long; accepted: at most " +
                       std::to_string(detail::kMaxIniLine) + " characters per line");
}

// fgets-like reader for ini_parse_stream: one line of st.text per call.
char* read_line(char* buffer, int size, void* user) {
  auto& st = *static_cast<ParseState*>(user);
  if (st.offset >= st.text.size()) return nullptr;
  size_t end = st.text.find('\n', st.offset);
  if (end == std::string::npos) end = st.text.size();
  std::string line = st.text.substr(st.offset, end - st.offset);
  st.offset = end + 1;
  ++st.line;
  if (!line.empty() && line.back() == '\r') line.pop_back();

  std::string handed;  // overlong or broken lines reach inih as blank lines
  if (line.size() > detail::kMaxIniLine || line.size() + 1 > static_cast<size_t>(size)) {
    report_overlong(st, line);
  } else if (line.find('\0') != std::string::npos) {
    st.fail(st.line, "line contains a NUL byte; accepted: text");
  } else if (const size_t bad = detail::first_invalid_utf8(line); bad != std::string::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(line[bad]));
    st.fail(st.line, std::string("byte ") + byte + " at column " + std::to_string(bad + 1) +
                         " is not UTF-8; accepted: UTF-8 text (save the file as UTF-8)");
  } else {
    size_t start = line.find_first_not_of(" \t\f\v");
    handed = start == std::string::npos ? "" : line.substr(start);
    if (!handed.empty() && handed[0] == '[') check_section_header(st, handed);
  }
  std::memcpy(buffer, handed.c_str(), handed.size() + 1);
  return buffer;
}

int on_key(void* user, const char* section, const char* name, const char* value) {
  auto& st = *static_cast<ParseState*>(user);
  // No exception may cross inih's C frames: everything is caught here.
  try {
    std::string s = section, k = name;
    if (s.empty()) {
      st.fail(st.line, k + ": key before any [section]; accepted: a [section] header first, e.g. [" +
                           detail::schema_sections().front() + "]");
      return 1;
    }
    if (detail::section_keys(s).empty()) return 1;  // unknown section: reported at its header
    auto [it, inserted] = st.first_line.emplace(std::make_pair(s, k), st.line);
    if (!inserted && detail::find_key(s, k) != nullptr) {
      st.fail(st.line, "[" + s + "] " + k + ": duplicate key, first set on line " +
                           std::to_string(it->second) + "; accepted: each key once per file");
      return 1;
    }
    std::string error = detail::set_key(st.config, s, k, value);
    if (!error.empty()) st.fail(st.line, error);
  } catch (const std::exception& e) {
    st.fail(st.line, std::string("internal error: ") + e.what());
  }
  return 1;
}

}  // namespace

namespace detail {

std::vector<std::pair<std::string, int>> parse_ini(const std::string& text, const std::string& source,
                                                   Config& config) {
  ParseState st{text, source, config};
  int result = ini_parse_stream(&read_line, &st, &on_key, &st);
  if (result == -2) throw ConfigError(source + ": out of memory while parsing", __FILE__, __LINE__);
  // The handler never fails, so a positive result is inih's first syntax error.
  if (result > 0) {
    st.fail(result, "syntax error in '" + line_at(text, result) +
                        "'; accepted: '[section]', 'key = value' or a ';' comment");
  }
  if (st.error_line != 0) throw ConfigError(st.error, __FILE__, __LINE__);
  std::vector<std::pair<std::string, int>> keys;
  for (const auto& [name, line] : st.first_line) {
    if (find_key(name.first, name.second) != nullptr) keys.emplace_back(name.first + "." + name.second, line);
  }
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return keys;
}

}  // namespace detail

Config Config::parse(const std::string& text, const std::string& source,
                     const std::vector<std::string>& overrides) {
  Config config;
  detail::parse_ini(text, source, config);
  for (const auto& o : overrides) detail::apply_assignment(config, o, "override");
  return config;
}

Config Config::load_file(const std::string& path, const std::vector<std::string>& overrides) {
  return parse(read_config_file(path).text, path, overrides);
}

}  // namespace mpiaccel
