// What the readers of foreign config files share: their one-line errors,
// line numbers, and the text of a leaf's value.

#include "config/source_leaves.hpp"

#include "mpiaccel/config.hpp"

namespace mpiaccel::detail {

void fail_at(const std::string& source, int line, const std::string& what) {
  throw ConfigError(source + ":" + std::to_string(line) + ": " + what, __FILE__, __LINE__);
}

int line_of_byte(const std::string& text, size_t byte) {
  int line = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

std::string leaf_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    std::string out;
    for (const auto& item : value) out += (out.empty() ? "" : ", ") + leaf_text(item);
    return out;
  }
  return json_text(value);
}

std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mpiaccel::detail
