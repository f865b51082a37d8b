#include "trainer/metrics_log.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

MetricsLog::MetricsLog(const std::string& path, bool enabled) {
  if (!enabled || path.empty()) return;
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  path_ = path;
  file_ = std::fopen(path.c_str(), "a");
  MPIACCEL_CHECK(file_, "cannot open metrics file '" + path + "': " + std::strerror(errno) +
                            "; set [logging] metrics_file to a writable path");
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

namespace {

// The value of a line's "step" key, or -1.
long long step_of(const std::string& line) {
  const std::string key = "\"step\": ";
  const size_t at = line.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(line.c_str() + at + key.size(), nullptr, 10);
}

}  // namespace

void MetricsLog::forget_steps_after(int64_t step) {
  if (!file_) return;
  std::fclose(file_);
  file_ = nullptr;
  std::ifstream in(path_);
  const std::string tmp = path_ + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  std::string line;
  while (std::getline(in, line))
    if (step_of(line) <= step) out << line << '\n';
  out.close();
  MPIACCEL_CHECK(out.good() && std::rename(tmp.c_str(), path_.c_str()) == 0,
                 "cannot rewrite metrics file '" + path_ + "' after the resume: " + std::strerror(errno));
  file_ = std::fopen(path_.c_str(), "a");
  MPIACCEL_CHECK(file_, "cannot open metrics file '" + path_ + "': " + std::strerror(errno));
}

void MetricsLog::write(const JsonLine& line) {
  if (!file_) return;
  std::fputs((line.text() + "\n").c_str(), file_);
  std::fflush(file_);
}

}  // namespace mpiaccel::detail
