#pragma once
// Loads that read each byte once. A tensor that every rank loads whole (a
// DDP replica, a parameter of a smaller world's replicated layout, a scalar
// every rank keeps) would otherwise be read by every rank: N times the
// storage traffic. Instead the ranks split its bytes: each reads a 1/N slice
// at the dataset's address (RawReader) and an uneven all-gather gives every
// rank all of them. A tensor of 1 MiB or more travels alone (in windows of
// kGroupBytes), gathered straight into the target where it can take the
// bytes as they are; smaller ones are packed in manifest order into groups of
// at most kGroupBytes, so thousands of small tensors cost a few collectives. Every rank checks every
// saved shard's CRC32C on the gathered bytes, so damage is found as before,
// by every rank alike.
//
// MPIACCEL_CKPT_READ_ONCE=0 turns it off (each rank reads what it loads, as
// before): for comparison (bench/ckpt/read_once.sh).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

class RawReader;

inline constexpr int64_t kGroupBytes = int64_t{64} << 20;

/// For each target, whether every rank of `comm` loads that tensor whole and
/// it is readable raw (`raw_offsets` >= 0). Collective: one all-reduce of an
/// int per manifest tensor (O(tensors), whatever the world size).
std::vector<bool> replicated_targets(Communicator& comm, const CheckpointInfo& info,
                                     const std::map<std::string, int64_t>& raw_offsets,
                                     const ShardedStateDict& targets);

/// Reads the targets flagged by replicated_targets (every rank calls it with
/// the same flags). Throws, on every rank alike, naming a damaged shard.
void read_replicated(Communicator& comm, RawReader& reader, const CheckpointInfo& info,
                     const std::map<std::string, int64_t>& raw_offsets,
                     ShardedStateDict& targets, const std::vector<bool>& replicated);

}  // namespace mpiaccel::detail
