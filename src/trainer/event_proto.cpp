// Protocol buffer wire encoding of the event messages (see event_proto.hpp):
// a field is its key (number << 3 | wire type) as a varint, then a varint
// (type 0), 8 little-endian bytes (1), a varint length and the bytes (2), or
// 4 little-endian bytes (5).

#include "trainer/event_proto.hpp"

#include <cstring>

namespace mpiaccel::detail::event_proto {
namespace {

class Message {
 public:
  Message& varint(int field, uint64_t value) {
    key(field, 0);
    put_varint(value);
    return *this;
  }
  Message& fixed64(int field, double value) {
    key(field, 1);
    put_bytes(&value, 8);
    return *this;
  }
  Message& fixed32(int field, float value) {
    key(field, 5);
    put_bytes(&value, 4);
    return *this;
  }
  Message& bytes(int field, const std::string& value) {
    key(field, 2);
    put_varint(value.size());
    out_ += value;
    return *this;
  }
  Message& message(int field, const Message& value) { return bytes(field, value.out_); }
  const std::string& encoded() const { return out_; }

 private:
  void key(int field, int type) { put_varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(type)); }
  void put_varint(uint64_t value) {
    while (value >= 0x80) {
      out_ += static_cast<char>((value & 0x7f) | 0x80);
      value >>= 7;
    }
    out_ += static_cast<char>(value);
  }
  void put_bytes(const void* data, size_t size) {  // little-endian hosts (x86-64, aarch64)
    char buffer[8];
    std::memcpy(buffer, data, size);
    out_.append(buffer, size);
  }

  std::string out_;
};

// Event's fields.
constexpr int kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5, kSessionLog = 7;
// Summary.Value's.
constexpr int kTag = 1, kSimpleValue = 2, kTensor = 8, kMetadata = 9;
constexpr int kDtString = 7;   // tensorflow.DataType DT_STRING
constexpr int kStart = 1;      // SessionLog.SessionStatus START

Message event(double wall_time, int64_t step) {
  Message e;
  e.fixed64(kWallTime, wall_time).varint(kStep, static_cast<uint64_t>(step));
  return e;
}

Message summary_of(const Message& value) {
  Message summary;
  summary.message(1, value);  // Summary.value
  return summary;
}

}  // namespace

std::string file_version_event(double wall_time, const std::string& version) {
  Message e;
  e.fixed64(kWallTime, wall_time).bytes(kFileVersion, version);
  return e.encoded();
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  Message v;
  v.bytes(kTag, tag).fixed32(kSimpleValue, value);
  return event(wall_time, step).message(kSummary, summary_of(v)).encoded();
}

std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text) {
  Message plugin;
  plugin.bytes(1, "text");  // PluginData.plugin_name
  Message metadata;
  metadata.message(1, plugin);  // SummaryMetadata.plugin_data
  Message tensor;
  tensor.varint(1, kDtString).message(2, Message()).bytes(8, text);  // dtype, tensor_shape (scalar), string_val
  Message v;
  v.bytes(kTag, tag).message(kMetadata, metadata).message(kTensor, tensor);
  return event(wall_time, step).message(kSummary, summary_of(v)).encoded();
}

std::string session_start_event(double wall_time, int64_t step) {
  Message log;
  log.varint(1, kStart);  // SessionLog.status
  return event(wall_time, step).message(kSessionLog, log).encoded();
}

}  // namespace mpiaccel::detail::event_proto
