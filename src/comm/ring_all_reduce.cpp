// The pipelined ring all-reduce, and its two halves (see ring_all_reduce.hpp).

#include "comm/ring_all_reduce.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "runtime/check_mpi.hpp"

namespace mpiaccel::detail {
namespace {

constexpr int kRingTag = 17;

// Chunk c of the buffer, in elements: [begin, begin + count).
struct Span {
  int64_t begin = 0;
  int64_t count = 0;
};

// The 2(p − 1) steps around the ring over `count` elements of `data` cut
// into p chunks. `shift` relabels the chunks: with 1, rank r ends the
// reduce-scatter half holding chunk r (MPI's order); the all-reduce needs no
// relabelling.
class Ring {
 public:
  Ring(char* data, int64_t count, int64_t element_bytes, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
       int64_t segment_bytes, int shift = 0)
      : data_(data), element_bytes_(element_bytes), type_(type), op_(op), comm_(comm), shift_(shift) {
    MPIACCEL_CHECK_MPI(MPI_Comm_rank(comm, &rank_));
    MPIACCEL_CHECK_MPI(MPI_Comm_size(comm, &size_));
    const int64_t base = count / size_, extra = count % size_;
    int64_t offset = 0;
    for (int c = 0; c < size_; ++c) {
      chunks_.push_back({offset, base + (c < extra ? 1 : 0)});
      offset += chunks_.back().count;
    }
    segment_ = std::max<int64_t>(1, segment_bytes / element_bytes);
    scratch_.resize(static_cast<size_t>((base + 1) * element_bytes));
  }

  // Steps [first, last) of 2(p − 1): the first p − 1 reduce (the
  // reduce-scatter half), the rest copy (the all-gather half). Step t
  // receives chunk in(t) from the left and sends chunk in(t − 1) to the
  // right: what the step before received (the first step sends a chunk this
  // rank holds already).
  void run(int first, int last) {
    send_chunk_segments(chunk_in(first - 1));
    for (int t = first; t < last; ++t) receive_step(t, t + 1 < last);
    wait_sends(-1);
  }
  int steps() const { return 2 * (size_ - 1); }
  int size() const { return size_; }

 private:
  int chunk_in(int t) const { return ((rank_ - t - 1 - shift_) % size_ + size_) % size_; }
  int right() const { return (rank_ + 1) % size_; }
  int left() const { return (rank_ + size_ - 1) % size_; }
  char* at(int64_t element) const { return data_ + element * element_bytes_; }

  // Posts the send of one segment of chunk c.
  void send_segment(int c, int64_t segment_begin, int64_t n) {
    MPI_Request request;
    MPIACCEL_CHECK_MPI(MPI_Isend(at(chunks_[c].begin + segment_begin), static_cast<int>(n), type_, right(),
                                 kRingTag, comm_, &request));
    sends_[c].push_back(request);
  }
  void send_chunk_segments(int c) {
    for (int64_t s = 0; s < chunks_[c].count; s += segment_) send_segment(c, s, std::min(segment_, chunks_[c].count - s));
  }
  // Waits for the sends out of chunk c (every chunk when c < 0).
  void wait_sends(int c) {
    for (auto& [chunk, requests] : sends_) {
      if (c >= 0 && chunk != c) continue;
      MPIACCEL_CHECK_MPI(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
      requests.clear();
    }
  }

  void receive_step(int t, bool forward) {
    const int c = chunk_in(t);
    const Span span = chunks_[c];
    const bool reduce = t < size_ - 1;
    // A chunk received in place must not still be on its way out.
    if (!reduce) wait_sends(c);
    std::vector<MPI_Request> receives;
    for (int64_t s = 0; s < span.count; s += segment_) {
      const int64_t n = std::min(segment_, span.count - s);
      char* into = reduce ? scratch_.data() + s * element_bytes_ : at(span.begin + s);
      receives.emplace_back();
      MPIACCEL_CHECK_MPI(MPI_Irecv(into, static_cast<int>(n), type_, left(), kRingTag, comm_, &receives.back()));
    }
    size_t k = 0;
    for (int64_t s = 0; s < span.count; s += segment_, ++k) {
      const int64_t n = std::min(segment_, span.count - s);
      MPIACCEL_CHECK_MPI(MPI_Wait(&receives[k], MPI_STATUS_IGNORE));
      if (reduce) {
        // The reduction target may still be on its way out (a send of this chunk by an earlier step).
        if (k == 0) wait_sends(c);
        MPIACCEL_CHECK_MPI(MPI_Reduce_local(scratch_.data() + s * element_bytes_, at(span.begin + s),
                                            static_cast<int>(n), type_, op_));
      }
      if (forward) send_segment(c, s, n);
    }
  }

  char* data_;
  int64_t element_bytes_;
  MPI_Datatype type_;
  MPI_Op op_;
  MPI_Comm comm_;
  int shift_ = 0;
  int rank_ = 0, size_ = 1;
  int64_t segment_ = 1;
  std::vector<Span> chunks_;
  std::vector<char> scratch_;
  std::map<int, std::vector<MPI_Request>> sends_;
};

}  // namespace

void ring_all_reduce(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm, int64_t segment_bytes) {
  if (count == 0) return;
  Ring ring(static_cast<char*>(data), count, element_bytes, type, op, comm, segment_bytes);
  if (ring.size() > 1) ring.run(0, ring.steps());
}

void ring_reduce_scatter_in_place(void* data, void* output, int64_t block, int64_t element_bytes, MPI_Datatype type,
                                  MPI_Op op, MPI_Comm comm, int64_t segment_bytes) {
  if (block == 0) return;
  int size = 1, rank = 0;
  MPIACCEL_CHECK_MPI(MPI_Comm_size(comm, &size));
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  Ring ring(static_cast<char*>(data), block * size, element_bytes, type, op, comm, segment_bytes, /*shift=*/1);
  if (size > 1) ring.run(0, size - 1);
  const auto bytes = static_cast<size_t>(block * element_bytes);
  std::memcpy(output, static_cast<char*>(data) + bytes * static_cast<size_t>(rank), bytes);
}

void ring_reduce_scatter(const void* input, void* output, int64_t block, int64_t element_bytes, MPI_Datatype type,
                         MPI_Op op, MPI_Comm comm, int64_t segment_bytes) {
  int size = 1;
  MPIACCEL_CHECK_MPI(MPI_Comm_size(comm, &size));
  if (block == 0) return;
  // Reduced in a copy (overwritten whole: not zero-filled first), so the
  // input stays as the caller gave it.
  const auto bytes = static_cast<size_t>(block * element_bytes) * static_cast<size_t>(size);
  const std::unique_ptr<char[]> work(new char[bytes]);
  std::memcpy(work.get(), input, bytes);
  ring_reduce_scatter_in_place(work.get(), output, block, element_bytes, type, op, comm, segment_bytes);
}

void ring_all_gather(const void* input, void* output, int64_t block, int64_t element_bytes, MPI_Datatype type,
                     MPI_Comm comm, int64_t segment_bytes) {
  int size = 1, rank = 0;
  MPIACCEL_CHECK_MPI(MPI_Comm_size(comm, &size));
  MPIACCEL_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  if (block == 0) return;
  const auto bytes = static_cast<size_t>(block * element_bytes);
  char* own = static_cast<char*>(output) + bytes * static_cast<size_t>(rank);
  if (own != input) std::memcpy(own, input, bytes);
  Ring ring(static_cast<char*>(output), block * size, element_bytes, type, MPI_OP_NULL, comm, segment_bytes,
            /*shift=*/1);
  if (size > 1) ring.run(size - 1, ring.steps());
}

}  // namespace mpiaccel::detail
