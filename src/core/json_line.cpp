// JSON text of numbers and strings (see json_line.hpp).
#include "core/json_line.hpp"

#include <cmath>
#include <cstdio>

namespace mpiaccel::detail {

std::string json_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

JsonLine& JsonLine::add(const std::string& key, double value) {
  char buf[64];
  if (std::isfinite(value))
    std::snprintf(buf, sizeof(buf), "%.9g", value);
  else
    std::snprintf(buf, sizeof(buf), "null");  // JSON has no NaN/Inf
  fields_.emplace_back(key, buf);
  return *this;
}

JsonLine& JsonLine::add(const std::string& key, long long value) {
  fields_.emplace_back(key, std::to_string(value));
  return *this;
}

JsonLine& JsonLine::add(const std::string& key, const std::string& value) {
  fields_.emplace_back(key, "\"" + json_escape(value) + "\"");
  return *this;
}

std::string JsonLine::text() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i) out += ", ";
    out += "\"" + json_escape(fields_[i].first) + "\": " + fields_[i].second;
  }
  return out + "}";
}

}  // namespace mpiaccel::detail
