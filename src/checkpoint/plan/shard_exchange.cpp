// Shard records for a load, from their tensors' owners (see shard_exchange.hpp).

#include "checkpoint/plan/shard_exchange.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpoint/collective_phases.hpp"
#include "checkpoint/manifest/manifest_reader.hpp"
#include "checkpoint/hdf5/parallel_file.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/state.hpp"
#include "runtime/check_mpi.hpp"

namespace mpiaccel::detail {
namespace {

constexpr int kRequestWords = 3;  // tensor, first row, rows
constexpr int kAnswerWords = 5;   // tensor, saving rank, first row, rows, crc32c

// int64 words to each rank, and back what each rank sent here (MPI_Alltoallv).
std::vector<std::vector<int64_t>> all_to_all(MPI_Comm world,
                                             const std::vector<std::vector<int64_t>>& out) {
  const int size = static_cast<int>(out.size());
  std::vector<int> send_counts(size), recv_counts(size), send_at(size), recv_at(size);
  std::vector<int64_t> flat;
  for (int r = 0; r < size; ++r) {
    send_at[r] = static_cast<int>(flat.size());
    send_counts[r] = static_cast<int>(out[r].size());
    flat.insert(flat.end(), out[r].begin(), out[r].end());
  }
  MPIACCEL_CHECK_MPI(MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, world));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    recv_at[r] = total;
    total += recv_counts[r];
  }
  std::vector<int64_t> in(static_cast<size_t>(total) + 1);
  flat.push_back(0);  // never empty
  MPIACCEL_CHECK_MPI(MPI_Alltoallv(flat.data(), send_counts.data(), send_at.data(), MPI_INT64_T,
                                   in.data(), recv_counts.data(), recv_at.data(), MPI_INT64_T, world));
  std::vector<std::vector<int64_t>> from(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    from[static_cast<size_t>(r)].assign(in.begin() + recv_at[r], in.begin() + recv_at[r] + recv_counts[r]);
  return from;
}

// The first tensor of each rank's block, and the end.
std::vector<int64_t> block_starts(int64_t tensors, int size) {
  std::vector<int64_t> starts;
  for (int r = 0; r < size; ++r) starts.push_back(even_row_range(tensors, size, r).begin);
  starts.push_back(tensors);
  return starts;
}

int owner_of(const std::vector<int64_t>& starts, int64_t tensor) {
  return static_cast<int>(std::upper_bound(starts.begin(), starts.end() - 1, tensor) - starts.begin()) - 1;
}

// The owner's tensors' shards, read from the table and checked.
std::unordered_map<int64_t, std::vector<ShardInfo>> read_owned(hid_t file, const CheckpointInfo& info,
                                                               const ShardIndex& index,
                                                               int64_t lo, int64_t hi) {
  std::unordered_map<int64_t, std::vector<ShardInfo>> owned;
  if (lo >= hi) return owned;
  const int64_t first = index.first[static_cast<size_t>(lo)];
  const int64_t end = index.first[static_cast<size_t>(hi - 1)] + index.count[static_cast<size_t>(hi - 1)];
  H5Id dxpl = make_transfer_list(false);
  const std::vector<ShardRecord> records = read_shard_rows(file, info.path, first, end - first, dxpl);
  size_t next = 0;
  for (int64_t t = lo; t < hi; ++t) {
    TensorInfo tensor = info.tensors[static_cast<size_t>(t)];
    for (int64_t k = 0; k < index.count[static_cast<size_t>(t)]; ++k, ++next) {
      const ShardRecord& r = records[next];
      MPIACCEL_CHECK(r.name == tensor.name, "checkpoint " + info.path + ": /meta/shards row " +
                                                std::to_string(first + next) + " belongs to " +
                                                r.name + ", not " + tensor.name + " (damaged file)");
      tensor.shards.push_back({r.rank, r.first_row, r.rows, r.crc32c});
    }
    std::sort(tensor.shards.begin(), tensor.shards.end(),
              [](const ShardInfo& a, const ShardInfo& b) { return a.first_row < b.first_row; });
    check_shard_tiling(info.path, tensor);
    owned[t] = std::move(tensor.shards);
  }
  return owned;
}

}  // namespace

void fetch_covering_shards(MPI_Comm world, Communicator& comm, hid_t file, CheckpointInfo& info,
                           const ShardIndex& index, const ShardedStateDict& targets) {
  const int size = comm.size(), rank = comm.rank();
  const int64_t tensors = static_cast<int64_t>(info.tensors.size());
  const std::vector<int64_t> starts = block_starts(tensors, size);
  std::unordered_map<int64_t, std::vector<ShardInfo>> owned;
  const std::string error = error_message_of([&] {
    owned = read_owned(file, info, index, starts[static_cast<size_t>(rank)],
                       starts[static_cast<size_t>(rank) + 1]);
  });
  all_ok(comm, error.empty(), error);

  std::unordered_map<std::string, int64_t> tensor_index;
  for (int64_t t = 0; t < tensors; ++t) tensor_index[info.tensors[static_cast<size_t>(t)].name] = t;
  std::vector<std::vector<int64_t>> requests(static_cast<size_t>(size));
  for (const auto& target : targets.tensors) {
    if (target.row_count == 0) continue;
    const int64_t t = tensor_index.at(target.name);
    auto& to = requests[static_cast<size_t>(owner_of(starts, t))];
    to.insert(to.end(), {t, target.row_begin, target.row_count});
  }
  const auto asked = all_to_all(world, requests);

  // Each request answered with the saved shards that overlap its rows.
  std::vector<std::vector<int64_t>> answers(static_cast<size_t>(size));
  for (size_t from = 0; from < asked.size(); ++from) {
    const auto& words = asked[from];
    for (size_t i = 0; i + kRequestWords <= words.size(); i += kRequestWords) {
      const int64_t t = words[i], begin = words[i + 1], end = begin + words[i + 2];
      for (const ShardInfo& s : owned.at(t)) {
        if (s.rows > 0 && (s.first_row + s.rows <= begin || s.first_row >= end)) continue;
        answers[from].insert(answers[from].end(),
                             {t, s.rank, s.first_row, s.rows, static_cast<int64_t>(s.crc32c)});
      }
    }
  }
  for (const auto& words : all_to_all(world, answers))
    for (size_t i = 0; i + kAnswerWords <= words.size(); i += kAnswerWords)
      info.tensors[static_cast<size_t>(words[i])].shards.push_back(
          {static_cast<int>(words[i + 1]), words[i + 2], words[i + 3],
           static_cast<uint32_t>(words[i + 4])});
  for (auto& t : info.tensors)
    std::sort(t.shards.begin(), t.shards.end(),
              [](const ShardInfo& a, const ShardInfo& b) { return a.first_row < b.first_row; });
}

}  // namespace mpiaccel::detail
