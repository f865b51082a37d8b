#pragma once
// JSON text of numbers and strings, for the metrics log and the command's
// --json output (no JSON library needed for writing one flat object).

#include <string>
#include <utility>
#include <vector>

namespace mpiaccel::detail {

/// One JSON object built field by field: numbers and strings only.
class JsonLine {
 public:
  JsonLine& add(const std::string& key, double value);
  JsonLine& add(const std::string& key, long long value);
  JsonLine& add(const std::string& key, const std::string& value);
  std::string text() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // key, encoded value
};

/// `text` with JSON's escapes, without the quotes.
std::string json_escape(const std::string& text);

}  // namespace mpiaccel::detail
