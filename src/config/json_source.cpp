// JSON config files into leaves, with the line of each key. nlohmann/json
// checks the syntax and builds the values (keeping the file's key order); it
// does not keep positions, so a scan of the (then known valid) text finds the
// line of every key, in the same order as a walk of the parsed document.

#include <string>
#include <vector>

#include "config/source_leaves.hpp"
#include "mpiaccel/config.hpp"

namespace mpiaccel::detail {
namespace {

using Json = nlohmann::ordered_json;

// The line of every object key of valid JSON text, in text order: a string
// followed by ':' is a key.
std::vector<int> key_lines(const std::string& text) {
  std::vector<int> lines;
  int line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') ++line;
    if (text[i] != '"') continue;
    const int start_line = line;
    for (++i; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\') ++i;  // an escaped character (a raw newline cannot occur in a string)
    }
    size_t next = text.find_first_not_of(" \t\r\n", i + 1);
    if (next != std::string::npos && text[next] == ':') lines.push_back(start_line);
  }
  return lines;
}

struct Walk {
  const std::string& source;
  const std::vector<int>& lines;
  size_t next_key = 0;
  std::vector<SourceLeaf> leaves;

  int take_line() { return next_key < lines.size() ? lines[next_key++] : 0; }

  // Keys inside lists are counted too, so the lines stay in step.
  void skip_keys(const Json& value) {
    if (value.is_object()) {
      for (const auto& [key, member] : value.items()) {
        take_line();
        skip_keys(member);
      }
    } else if (value.is_array()) {
      for (const auto& item : value) skip_keys(item);
    }
  }

  void object(const Json& value, const std::string& prefix, int depth, int line_of_key) {
    if (depth > kMaxSourceDepth) {
      fail_at(source, line_of_key, "objects nested deeper than " + std::to_string(kMaxSourceDepth) +
                                    " levels; accepted: a config file");
    }
    for (const auto& [key, member] : value.items()) {
      const int line = take_line();
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      if (member.is_object() && !member.empty()) {
        object(member, path, depth + 1, line);
      } else {
        leaves.push_back({path, nlohmann::json::parse(member.dump(-1, ' ', false, Json::error_handler_t::replace)), line});
        skip_keys(member);
      }
    }
  }
};

// Duplicate keys are refused while parsing (nlohmann keeps the last silently).
struct DuplicateCheck {
  std::vector<std::vector<std::string>> open;  // the keys of each open object
  std::string duplicate;

  bool operator()(int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) open.emplace_back();
    if (event == Json::parse_event_t::object_end && !open.empty()) open.pop_back();
    if (event == Json::parse_event_t::key && !open.empty() && duplicate.empty()) {
      const std::string key = parsed.get<std::string>();
      for (const auto& seen : open.back()) {
        if (seen == key) duplicate = key;
      }
      open.back().push_back(key);
    }
    return true;
  }
};

// The line where `key` is written as a key the second time.
int second_key_line(const std::string& text, const std::string& key) {
  const std::string quoted = nlohmann::json(key).dump();
  int seen = 0;
  for (size_t at = text.find(quoted); at != std::string::npos; at = text.find(quoted, at + 1)) {
    const size_t next = text.find_first_not_of(" \t\r\n", at + quoted.size());
    if (next != std::string::npos && text[next] == ':' && ++seen == 2) return line_of_byte(text, at);
  }
  return 1;
}

// The line where brackets first nest deeper than `limit` (outside strings),
// or 0: a nesting bound before parsing, so no later recursion runs deep.
int line_nested_deeper(const std::string& text, int limit) {
  int depth = 0, line = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return line;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return 0;
}

}  // namespace

std::vector<SourceLeaf> read_json_leaves(const std::string& text, const std::string& source) {
  if (const int line = line_nested_deeper(text, kMaxSourceDepth)) {
    fail_at(source, line, "nested deeper than " + std::to_string(kMaxSourceDepth) + " levels; accepted: a config file");
  }
  Json document;
  DuplicateCheck duplicates;
  try {
    document = Json::parse(text, std::ref(duplicates));
  } catch (const Json::parse_error& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..."
    std::string what = e.what();
    const size_t colon = what.find(": ", what.find("parse error"));
    if (colon != std::string::npos) what = what.substr(colon + 2);
    fail_at(source, line_of_byte(text, e.byte == 0 ? 0 : e.byte - 1),
         "JSON syntax error: " + what + "; accepted: a JSON object");
  } catch (const Json::exception& e) {  // "number overflow parsing '1e999'"
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    const size_t quote = what.find('\'');
    const size_t at = quote == std::string::npos ? std::string::npos
                                                 : text.find(what.substr(quote + 1, what.rfind('\'') - quote - 1));
    fail_at(source, at == std::string::npos ? 1 : line_of_byte(text, at),
         "JSON error: " + what + "; accepted: numbers a double holds");
  }
  if (!duplicates.duplicate.empty()) {
    fail_at(source, second_key_line(text, duplicates.duplicate), "key '" + duplicates.duplicate + "' appears twice in one object; accepted: each key once");
  }
  if (!document.is_object()) fail_at(source, 1, "the file is JSON but not an object; accepted: { \"key\": value, ... }");
  const std::vector<int> lines = key_lines(text);
  Walk walk{source, lines, 0, {}};
  walk.object(document, "", 1, 1);
  return walk.leaves;
}

}  // namespace mpiaccel::detail
