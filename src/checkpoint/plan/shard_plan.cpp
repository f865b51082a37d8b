// The shard table's plan (see shard_plan.hpp).

#include "checkpoint/plan/shard_plan.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>

#include "checkpoint/manifest/manifest_codec.hpp"
#include "checkpoint/plan/row_tiling.hpp"
#include "checkpoint/save/save_writer.hpp"
#include "mpiaccel/error.hpp"
#include "runtime/check_mpi.hpp"

namespace mpiaccel::detail {
namespace {

// A 40-bit hash of a row boundary: sums of up to 2^23 of them fit an int64.
int64_t boundary_hash(int64_t row) {
  uint64_t z = static_cast<uint64_t>(row) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<int64_t>((z ^ (z >> 31)) >> 24);
}

// Rank 0, on the error path only: every tensor's rows are written by exactly one rank.
std::string tiling_problem(const std::vector<ShardRecord>& records,
                           const std::vector<LocalShard>& shards) {
  std::map<std::string, std::vector<const ShardRecord*>> by_name;
  for (const auto& r : records) by_name[r.name].push_back(&r);
  for (const auto& s : shards) {
    auto& list = by_name[s.tensor->name];
    std::sort(list.begin(), list.end(),
              [](const ShardRecord* a, const ShardRecord* b) { return a->first_row < b->first_row; });
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const auto* r : list) ranges.emplace_back(r->first_row, r->rows);
    const TilingFault fault = find_tiling_fault(ranges, s.rows);
    const std::string tensor = "checkpoint: tensor " + s.tensor->name + ": ";
    if (fault.kind == TilingFault::kOverlap && fault.range < list.size())
      return tensor + "rows from " + std::to_string(fault.begin) + " are held by rank " +
             std::to_string(list[fault.range]->rank) +
             " and another rank; each row must be saved by exactly one rank";
    if (fault.kind != TilingFault::kNone)
      return tensor + "rows [" + std::to_string(fault.begin) + ", " + std::to_string(fault.end) +
             ") are held by " + (fault.kind == TilingFault::kHole ? "no rank" : "two ranks");
  }
  return "checkpoint: the ranks' rows do not tile the tensors";
}

}  // namespace

ShardTablePlan plan_shard_table(MPI_Comm world, Communicator& comm,
                                const std::vector<LocalShard>& shards,
                                const std::vector<ShardRecord>& records,
                                const std::vector<size_t>& tensor_of) {
  const int64_t n = static_cast<int64_t>(shards.size());
  // Per tensor: [0, n) this rank's record count, [n, 2n) begin hashes, [2n, 3n) end hashes.
  at::Tensor sums = at::zeros({3 * n}, at::kLong);
  int64_t* s = sums.data_ptr<int64_t>();
  for (size_t i = 0; i < records.size(); ++i) {
    const int64_t t = static_cast<int64_t>(tensor_of[i]);
    s[t] += 1;
    if (records[i].rows == 0) continue;
    s[n + t] += boundary_hash(records[i].first_row);
    s[2 * n + t] += boundary_hash(records[i].first_row + records[i].rows);
  }
  std::vector<int64_t> before(static_cast<size_t>(n), 0);
  if (n > 0)
    MPIACCEL_CHECK_MPI(MPI_Exscan(s, before.data(), static_cast<int>(n), MPI_INT64_T, MPI_SUM, world));
  if (comm.rank() == 0) std::fill(before.begin(), before.end(), 0);  // Exscan leaves it undefined
  comm.all_reduce(sums, ReduceOp::Sum);

  ShardTablePlan plan;
  plan.counts.assign(s, s + n);
  bool tiled = true;
  std::vector<int64_t> base(static_cast<size_t>(n), 0);
  for (int64_t t = 0; t < n; ++t) {
    base[static_cast<size_t>(t)] = static_cast<int64_t>(plan.total);
    plan.total += static_cast<size_t>(s[t]);
    const int64_t rows = shards[static_cast<size_t>(t)].rows;
    tiled &= rows == 0 ? s[t] == 1 : s[n + t] + boundary_hash(rows) == s[2 * n + t] + boundary_hash(0);
  }
  if (!tiled) {
    const auto gathered = comm.gather_bytes(encode_records(records), 0);
    std::string why;
    if (comm.rank() == 0) {
      std::vector<ShardRecord> all;
      for (const auto& g : gathered) {
        auto part = decode_records(g);
        all.insert(all.end(), part.begin(), part.end());
      }
      why = tiling_problem(all, shards);
    }
    MPIACCEL_THROW(comm.broadcast_bytes(why, 0));
  }
  for (size_t i = 0; i < records.size(); ++i)
    plan.positions.push_back(base[tensor_of[i]] + before[tensor_of[i]]);
  return plan;
}

}  // namespace mpiaccel::detail
