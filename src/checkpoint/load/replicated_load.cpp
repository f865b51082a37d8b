// Replicated tensors read once (see replicated_load.hpp).

#include "checkpoint/load/replicated_load.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "checkpoint/collective_phases.hpp"
#include "checkpoint/manifest/manifest.hpp"
#include "checkpoint/load/raw_reader.hpp"
#include "checkpoint/load/tensor_io.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

bool read_once_enabled() {
  const char* value = std::getenv("MPIACCEL_CKPT_READ_ONCE");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

constexpr int64_t kAloneBytes = int64_t{1} << 20;

// The tensors one all-gather carries, consecutive in the manifest.
struct Group {
  std::vector<const TensorInfo*> tensors;
  int64_t bytes = 0;
};

std::vector<Group> groups_of(const CheckpointInfo& info, const std::vector<bool>& replicated) {
  std::vector<Group> groups;
  for (size_t i = 0; i < info.tensors.size(); ++i) {
    const TensorInfo& t = info.tensors[i];
    if (!replicated[i]) continue;
    // A tensor of 1 MiB or more travels alone, so it can be gathered in place.
    const bool alone = t.bytes >= kAloneBytes;
    if (groups.empty() || alone || groups.back().tensors.front()->bytes >= kAloneBytes ||
        groups.back().bytes + t.bytes > kGroupBytes)
      groups.emplace_back();
    groups.back().tensors.push_back(&t);
    groups.back().bytes += t.bytes;
  }
  return groups;
}

// Reads bytes [from, to) of the group's concatenated tensors into `out`.
void read_slice(RawReader& reader, const std::map<std::string, int64_t>& raw_offsets,
                const Group& group, int64_t from, int64_t to, char* out) {
  int64_t base = 0;
  for (const TensorInfo* t : group.tensors) {
    const int64_t lo = std::max(from, base), hi = std::min(to, base + t->bytes);
    if (hi > lo) {
      char* at = out + (lo - from);
      reader.read(raw_offsets.at(t->name) + (lo - base), hi - lo, [&at](const char* data, int64_t n) {
        std::memcpy(at, data, static_cast<size_t>(n));
        at += n;
      });
    }
    base += t->bytes;
  }
}

// Bytes [from, from + window.numel()) of the group into `window` on every
// rank: rank r reads the r-th 1/N of them, then an uneven all-gather.
void gather_window(Communicator& comm, RawReader& reader,
                   const std::map<std::string, int64_t>& raw_offsets, const Group& group,
                   int64_t from, at::Tensor window, at::Tensor& mine_buffer) {
  const int64_t size = comm.size(), rank = comm.rank(), bytes = window.numel();
  const int64_t slice = (bytes + size - 1) / size;
  std::vector<int64_t> counts(static_cast<size_t>(size));
  for (int64_t r = 0; r < size; ++r)
    counts[static_cast<size_t>(r)] = std::clamp<int64_t>(bytes - r * slice, 0, slice);
  const int64_t my_count = counts[static_cast<size_t>(rank)];
  if (mine_buffer.numel() < my_count) mine_buffer = at::empty({my_count}, at::kByte);
  at::Tensor mine = mine_buffer.narrow(0, 0, my_count);
  const std::string error = error_message_of([&] {
    const int64_t begin = from + rank * slice;
    read_slice(reader, raw_offsets, group, begin, begin + mine.numel(),
               static_cast<char*>(mine.data_ptr()));
  });
  // A read that failed on one rank fails the load on every rank, before any gather.
  all_ok(comm, error.empty(), error.empty() ? error : "rank " + std::to_string(rank) + ": " + error);
  comm.all_gather_uneven(window, mine, counts);
}

// Checks every shard of `saved` (whole, in `bytes`) and copies it into the target.
void deliver(const TensorInfo& saved, const char* bytes, ShardedTensor& target,
             const std::string& path) {
  const std::string damage = check_shard_crcs(saved, bytes, 0, row_count_of(saved.shape), path);
  MPIACCEL_CHECK(damage.empty(), damage);
  at::Tensor& local = target.local;
  if (local.data_ptr() == bytes) return;  // gathered in place
  const at::Tensor view = at::from_blob(const_cast<char*>(bytes), local.sizes(),
                                        at::TensorOptions().dtype(saved.dtype));
  local.copy_(view);
}

}  // namespace

std::vector<bool> replicated_targets(Communicator& comm, const CheckpointInfo& info,
                                     const std::map<std::string, int64_t>& raw_offsets,
                                     const ShardedStateDict& targets) {
  std::vector<bool> replicated(info.tensors.size(), false);
  if (comm.size() == 1 || info.tensors.empty()) return replicated;
  std::map<std::string, const ShardedTensor*> by_name;
  for (const auto& t : targets.tensors) by_name[t.name] = &t;
  at::Tensor votes = at::zeros({static_cast<int64_t>(info.tensors.size())}, at::kInt);
  int32_t* vote = votes.data_ptr<int32_t>();
  const bool enabled = read_once_enabled();
  for (size_t i = 0; i < info.tensors.size(); ++i) {
    const TensorInfo& saved = info.tensors[i];
    auto it = by_name.find(saved.name);
    vote[i] = enabled && it != by_name.end() && saved.bytes > 0 && raw_offsets.at(saved.name) >= 0 &&
              it->second->row_begin == 0 && it->second->row_count == row_count_of(saved.shape);
  }
  comm.all_reduce(votes, ReduceOp::Min);
  for (size_t i = 0; i < info.tensors.size(); ++i) replicated[i] = vote[i] != 0;
  return replicated;
}

void read_replicated(Communicator& comm, RawReader& reader, const CheckpointInfo& info,
                     const std::map<std::string, int64_t>& raw_offsets,
                     ShardedStateDict& targets, const std::vector<bool>& replicated) {
  std::map<std::string, ShardedTensor*> by_name;
  for (auto& t : targets.tensors) by_name[t.name] = &t;
  at::Tensor group_buffer, mine_buffer;  // reused: fresh pages cost a fault each
  for (const Group& group : groups_of(info, replicated)) {
    // A lone tensor that can take the bytes as they are is gathered into itself.
    ShardedTensor& first = *by_name.at(group.tensors.front()->name);
    const bool in_place = group.tensors.size() == 1 && first.local.device().is_cpu() &&
                          first.local.is_contiguous() &&
                          first.local.scalar_type() == group.tensors.front()->dtype;
    if (!in_place && group_buffer.numel() < group.bytes)
      group_buffer = at::empty({group.bytes}, at::kByte);
    at::Tensor all = in_place ? first.local.view({-1}).view(at::kByte)
                              : group_buffer.narrow(0, 0, group.bytes);
    // A group larger than kGroupBytes (one large tensor) in windows of it.
    for (int64_t from = 0; from < group.bytes; from += kGroupBytes) {
      const int64_t to = std::min(group.bytes, from + kGroupBytes);
      gather_window(comm, reader, raw_offsets, group, from, all.narrow(0, from, to - from),
                    mine_buffer);
    }
    const char* bytes = static_cast<const char*>(all.data_ptr());
    for (const TensorInfo* saved : group.tensors) {
      deliver(*saved, bytes, *by_name.at(saved->name), info.path);
      bytes += saved->bytes;
    }
  }
}

}  // namespace mpiaccel::detail
