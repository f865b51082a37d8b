#include "comm/shm_region.hpp"

#include <ATen/ops/from_blob.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <thread>

#include "comm/shm_reduce_kernels.hpp"
#include "comm/shm_segment.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

// The first page of each rank's segment. Only its owner writes it; peers read
// it. The two counters hold the sequence number of the last op that passed each
// stage on this rank, and are futex words: a peer waiting for one sleeps in
// the kernel instead of spinning on a core the computation needs.
struct ShmRegion::Control {
  alignas(64) std::atomic<uint32_t> arrived{0};  // input ready, op described below
  std::atomic<uint32_t> departed{0};              // own slice reduced into every copy
  int64_t offset = 0;                             // of the op's tensor, from data()
  int64_t numel = 0;
  int32_t dtype = 0;
  int32_t op = 0;
};

namespace {

constexpr int64_t kHeaderBytes = 4096;
// Slices start on 64-byte boundaries, so no cache line is written by two ranks.
constexpr int64_t kSliceAlignBytes = 64;

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "the stage counters must be plain 32-bit words to serve as futexes");

// Sequence numbers wrap; `value` has reached `target` if it is at most 2^31
// ahead of it.
bool reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

int futex(std::atomic<uint32_t>& word, int operation, uint32_t value, const timespec* timeout) {
  return static_cast<int>(
      ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), operation, value, timeout, nullptr, 0));
}

void publish(std::atomic<uint32_t>& word, uint32_t value) {
  word.store(value, std::memory_order_release);
  futex(word, FUTEX_WAKE, INT_MAX, nullptr);
}

// Waits until a peer's counter reaches `target`: a short spin covers a peer a
// few microseconds behind; then yielding lets a peer that shares our core
// (ranks outnumbering cores) run and arrive; then the futex sleeps until
// publish() wakes it. The 100 ms timeout only re-checks the word; the
// communicator's deadline watcher, not this loop, ends a job whose peer never
// arrives.
void wait_for(std::atomic<uint32_t>& word, uint32_t target) {
  for (int spin = 0; spin < 200; ++spin) {
    if (reached(word.load(std::memory_order_acquire), target)) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  for (int turn = 0; turn < 50; ++turn) {
    if (reached(word.load(std::memory_order_acquire), target)) return;
    std::this_thread::yield();
  }
  const timespec timeout{0, 100 * 1000 * 1000};
  for (;;) {
    const uint32_t seen = word.load(std::memory_order_acquire);
    if (reached(seen, target)) return;
    futex(word, FUTEX_WAIT, seen, &timeout);
  }
}

// [begin, end) of rank `r`'s slice of `numel` elements split over `size`.
std::pair<int64_t, int64_t> slice_of(int r, int size, int64_t numel, int64_t element_bytes) {
  const int64_t align = std::max<int64_t>(1, kSliceAlignBytes / element_bytes);
  int64_t per_rank = (numel + size - 1) / size;
  per_rank = (per_rank + align - 1) / align * align;
  const int64_t begin = std::min(numel, per_rank * r);
  return {begin, std::min(numel, begin + per_rank)};
}

}  // namespace

std::shared_ptr<ShmRegion> ShmRegion::create(int rank, int size, int64_t bytes,
                                             const ShmSetupCollectives& collectives,
                                             std::string* why) {
  const std::string token = agree_on_segment_token(rank, bytes, collectives, "allocate_shared");
  std::shared_ptr<ShmRegion> region(new ShmRegion(rank, size));
  region->usable_bytes_ = round_up_to_pages(bytes);
  region->mapped_bytes_ = kHeaderBytes + region->usable_bytes_;
  region->mappings_.assign(static_cast<size_t>(size), nullptr);
  region->sources_.resize(static_cast<size_t>(size));
  region->outs_.resize(static_cast<size_t>(size));

  const std::string own = shm_segment_name(token, rank);
  void* mine = map_shm_segment(own, region->mapped_bytes_, true, why);
  region->mappings_[static_cast<size_t>(rank)] = mine;
  if (!collectives.all_true(mine != nullptr)) {
    if (mine) ::shm_unlink(own.c_str());
    return nullptr;  // the destructor unmaps
  }
  new (mine) Control();
  bool mapped_all = true;
  for (int peer = 0; peer < size && mapped_all; ++peer) {
    if (peer == rank) continue;
    void* theirs = map_shm_segment(shm_segment_name(token, peer), region->mapped_bytes_, false, why);
    region->mappings_[static_cast<size_t>(peer)] = theirs;
    mapped_all = theirs != nullptr;
  }
  // Every rank has opened every name (or failed to) by now: unlink ours, so
  // that nothing outlives the job's mappings.
  const bool ok = collectives.all_true(mapped_all);
  ::shm_unlink(own.c_str());
  return ok ? region : nullptr;
}

ShmRegion::~ShmRegion() {
  for (void* mapping : mappings_)
    if (mapping) ::munmap(mapping, static_cast<size_t>(mapped_bytes_));
}

ShmRegion::Control& ShmRegion::control(int rank) const {
  return *static_cast<Control*>(mappings_[static_cast<size_t>(rank)]);
}

char* ShmRegion::data(int rank) const {
  return static_cast<char*>(mappings_[static_cast<size_t>(rank)]) + kHeaderBytes;
}

at::Tensor ShmRegion::tensor(const std::shared_ptr<ShmRegion>& self) const {
  MPIACCEL_CHECK(self.get() == this, "ShmRegion::tensor: `self` must own this region");
  return at::from_blob(data(rank_), {usable_bytes_}, [keep = self](void*) {},
                       at::TensorOptions().dtype(at::kByte));
}

bool ShmRegion::contains(const at::Tensor& tensor) const {
  if (!tensor.defined() || !tensor.device().is_cpu()) return false;
  const char* begin = static_cast<const char*>(tensor.data_ptr());
  const char* end = begin + tensor.numel() * tensor.element_size();
  return begin >= data(rank_) && end <= data(rank_) + usable_bytes_;
}

bool ShmRegion::supports(at::ScalarType dtype, ReduceOp /*op*/) {
  return reduce_elementwise_supports(dtype);
}

void ShmRegion::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  MPIACCEL_CHECK(contains(tensor) && tensor.is_contiguous() && supports(tensor.scalar_type(), op),
                 "shared-memory all_reduce: the tensor must be a contiguous float tensor inside "
                 "the region");
  const uint32_t sequence = ++sequence_;
  const int64_t element_bytes = tensor.element_size();
  const int64_t offset = static_cast<const char*>(tensor.data_ptr()) - data(rank_);
  const int64_t numel = tensor.numel();
  Control& mine = control(rank_);
  mine.offset = offset;
  mine.numel = numel;
  mine.dtype = static_cast<int32_t>(tensor.scalar_type());
  mine.op = static_cast<int32_t>(op);
  publish(mine.arrived, sequence);

  // 1. Every rank's input is ready and describes the same op.
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    Control& theirs = control(peer);
    wait_for(theirs.arrived, sequence);
    MPIACCEL_CHECK(theirs.offset == offset && theirs.numel == numel && theirs.dtype == mine.dtype &&
                       theirs.op == mine.op,
                   "shared-memory all_reduce: rank " + std::to_string(peer) + " reduces " +
                       std::to_string(theirs.numel) + " elements at byte " +
                       std::to_string(theirs.offset) + ", rank " + std::to_string(rank_) + " " +
                       std::to_string(numel) + " at byte " + std::to_string(offset) +
                       ": every rank must all_reduce the same tensor of its region in the same order");
  }

  // 2. Reduce our slice, reading it from every rank, and write the result
  // into every rank's copy. Slice r of any copy is touched by rank r alone,
  // so no rank waits for another between reading and writing.
  const auto [begin, end] = slice_of(rank_, size_, numel, element_bytes);
  if (end > begin) {
    for (int r = 0; r < size_; ++r) {
      char* slice = data(r) + offset + begin * element_bytes;
      sources_[static_cast<size_t>(r)] = slice;
      outs_[static_cast<size_t>((r - rank_ + size_) % size_)] = slice;  // own copy first
    }
    reduce_elementwise(outs_, sources_, end - begin, tensor.scalar_type(), op);
  }
  publish(mine.departed, sequence);

  // 3. No rank may return (and let its caller read or write the tensor)
  // before every peer has written its slice into it and read ours.
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_) wait_for(control(peer).departed, sequence);
}

}  // namespace mpiaccel::detail
