#pragma once
// Internal: the POSIX shared-memory segments that the ranks of one node map
// together (ShmRegion: one segment per rank; ShmBlock: one for all), and the
// collective steps their set-up needs.

#include <cstdint>
#include <functional>
#include <string>

namespace mpiaccel::detail {

/// The collective steps a segment set-up needs from its communicator (run on
/// the calling thread, in the same order on every rank).
struct ShmSetupCollectives {
  /// Rank 0's string on every rank.
  std::function<std::string(const std::string&)> broadcast_rank0;
  /// True on every rank iff `ok` is true on every rank.
  std::function<bool(bool ok)> all_true;
};

/// A name unique to this job and moment ("<pid>-<random><clock>"), for rank 0
/// to broadcast.
std::string make_shm_token();

/// Rank 0's fresh token, on every rank, after checking that every rank asks
/// for rank 0's `bytes` (a rank that mapped more bytes than the creator
/// reserved would fault on them). Throws the same error on every rank
/// otherwise; `who` names the call in it. Collective.
std::string agree_on_segment_token(int rank, int64_t bytes, const ShmSetupCollectives& collectives,
                                   const std::string& who);

/// "/mpiaccel-<token>-<index>".
std::string shm_segment_name(const std::string& token, int index);

/// Maps segment `name` of `bytes` (creating it first, with its pages
/// reserved, when `create`). Returns nullptr and sets `why` on failure.
void* map_shm_segment(const std::string& name, int64_t bytes, bool create, std::string* why);

/// `bytes` rounded up to whole pages (at least one).
int64_t round_up_to_pages(int64_t bytes);

}  // namespace mpiaccel::detail
