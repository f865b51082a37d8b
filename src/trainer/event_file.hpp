#pragma once
// TensorBoard event files (`[logging] report_to = tensorboard`), written
// here: TFRecord framing (a little-endian uint64 length, the masked CRC32C of
// those 8 bytes, the data, the masked CRC32C of the data) around tensorflow's
// Event protocol buffers, encoded by hand (event_proto.cpp says why).

#include <cstdint>
#include <cstdio>
#include <string>

namespace mpiaccel::detail {

class EventFile {
 public:
  /// Creates `dir` and a new file events.out.tfevents.<seconds>.<host>.<pid>
  /// in it, opened by the file_version event TensorBoard expects first.
  explicit EventFile(const std::string& dir);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  /// A scalar (simple_value, a float) of `tag` at `step`.
  void scalar(int64_t step, const std::string& tag, double value);
  /// A text summary (the text plugin renders it as markdown) of `tag` at `step`.
  void text(int64_t step, const std::string& tag, const std::string& text);
  /// SessionLog START at `step`: TensorBoard forgets the events of earlier
  /// files from `step` on (what a run logged after the checkpoint a resumed
  /// run started from).
  void restart(int64_t step);
  void flush();

  const std::string& path() const { return path_; }

 private:
  void record(const std::string& event);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mpiaccel::detail
