#pragma once
// Length-prefixed little-endian encoding of the few structures ranks exchange
// during a save or load (shard records, the manifest). Both ends run the same
// build, so no versioning is needed.

#include <cstdint>
#include <cstring>
#include <string>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

class ByteWriter {
 public:
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void i64(int64_t v) { raw(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::string& in) : in_(in) {}
  uint64_t u64() {
    uint64_t v;
    raw(&v, sizeof v);
    return v;
  }
  int64_t i64() {
    int64_t v;
    raw(&v, sizeof v);
    return v;
  }
  /// An element count, checked against the bytes left (each element takes
  /// at least `min_bytes_each`): a damaged message never sizes a huge vector.
  size_t count(size_t min_bytes_each) {
    const uint64_t n = u64();
    MPIACCEL_CHECK(n <= (in_.size() - pos_) / min_bytes_each,
                   "checkpoint: damaged message between ranks (a count past its end)");
    return static_cast<size_t>(n);
  }
  std::string str() {
    const uint64_t n = u64();
    need(n);
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  void need(uint64_t n) const {
    MPIACCEL_CHECK(n <= in_.size() - pos_, "checkpoint: truncated message between ranks");
  }
  void raw(void* p, size_t n) {
    need(n);
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
  }
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace mpiaccel::detail
