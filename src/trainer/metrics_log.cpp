#include "trainer/metrics_log.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "mpiaccel/error.hpp"

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

MetricsLog::MetricsLog(const std::string& path, bool enabled) {
  if (!enabled || path.empty()) return;
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  file_ = std::fopen(path.c_str(), "a");
  MPIACCEL_CHECK(file_, "cannot open metrics file '" + path + "': " + std::strerror(errno) +
                            "; set [logging] metrics_file to a writable path");
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const JsonLine& line) {
  if (!file_) return;
  std::fputs((line.text() + "\n").c_str(), file_);
  std::fflush(file_);
}

}  // namespace mpiaccel::detail
