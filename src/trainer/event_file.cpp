// EventFile: TFRecord framing of hand-encoded events (see event_file.hpp).

#include "trainer/event_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/crc32c.hpp"
#include "mpiaccel/error.hpp"
#include "trainer/event_proto.hpp"

namespace mpiaccel::detail {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// TFRecord's masked CRC32C: a checksum of checksummed data must not look
// like the data's own.
uint32_t masked_crc(const void* data, size_t size) {
  const uint32_t crc = crc32c(0, data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "host";
  return host;
}

}  // namespace

EventFile::EventFile(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto seconds = static_cast<long long>(now_seconds());
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(seconds) + "." + host_name() +
                                         "." + std::to_string(getpid()) + ".0"))
              .string();
  file_ = std::fopen(path_.c_str(), "ab");
  MPIACCEL_CHECK(file_, "cannot create the TensorBoard event file " + path_ + ": " + std::strerror(errno) +
                            "; set [logging] logging_dir to a writable directory");
  record(event_proto::file_version_event(now_seconds(), "brain.Event:2"));
  flush();
}

EventFile::~EventFile() {
  if (file_) std::fclose(file_);
}

void EventFile::scalar(int64_t step, const std::string& tag, double value) {
  record(event_proto::scalar_event(now_seconds(), step, tag, static_cast<float>(value)));
}

void EventFile::text(int64_t step, const std::string& tag, const std::string& text) {
  record(event_proto::text_event(now_seconds(), step, tag, text));
}

void EventFile::restart(int64_t step) { record(event_proto::session_start_event(now_seconds(), step)); }

void EventFile::flush() { std::fflush(file_); }

void EventFile::record(const std::string& event) {
  char header[12];
  const uint64_t length = event.size();  // little-endian hosts
  std::memcpy(header, &length, 8);
  const uint32_t length_crc = masked_crc(header, 8);
  std::memcpy(header + 8, &length_crc, 4);
  const uint32_t data_crc = masked_crc(event.data(), event.size());
  const bool ok = std::fwrite(header, 1, 12, file_) == 12 &&
                  std::fwrite(event.data(), 1, event.size(), file_) == event.size() &&
                  std::fwrite(&data_crc, 1, 4, file_) == 4;
  MPIACCEL_CHECK(ok, "cannot write the TensorBoard event file " + path_ + ": " + std::strerror(errno));
}

}  // namespace mpiaccel::detail
