// Checkpointer::save. The save runs in phases separated by agreements
// (all_ok), so that a failure any rank can detect before or after the
// collective HDF5 section makes every rank throw the same error:
//   1. local checks, host copies;
//   2. agreement on the tensor list (rank 0's is the reference), the shard
//      table's plan (shard_plan.hpp: each record's row, every tensor's rows
//      held exactly once, from O(tensors) collectives); rank 0 creates the
//      directory and checks free space;
//   3. the file and all its objects are created (metadata only; the same
//      calls with the same arguments on every rank, as parallel HDF5 needs);
//   4. each rank writes its tensor rows at the addresses HDF5 allocated
//      (RawWriter, O_DIRECT where possible), computing their CRC32C on the
//      staged copy; every rank writes its own rows of the shard table; HDF5
//      writes the small datasets (index, config, RNG) and closes the file; every rank syncs once
//      (errors are recorded and the remaining collective calls still made,
//      so no rank leaves the sequence early);
//   5. rank 0 commits (rename, fsync, latest) and prunes.
// All HDF5 calls are made from the calling thread (this HDF5 build is not
// thread-safe).

#include <ATen/core/Tensor.h>
#include <hdf5.h>
#include <torch/version.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "checkpoint/io/file_system.hpp"
#include "checkpoint/manifest/byte_codec.hpp"
#include "checkpoint/checkpoint_impl.hpp"
#include "checkpoint/save/save_writer.hpp"
#include "checkpoint/collective_phases.hpp"
#include "checkpoint/save/commit.hpp"
#include "checkpoint/hdf5/h5_attributes.hpp"
#include "checkpoint/hdf5/h5_types.hpp"
#include "checkpoint/manifest/manifest.hpp"
#include "checkpoint/hdf5/parallel_file.hpp"
#include "checkpoint/plan/shard_plan.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/log.hpp"
#include "runtime/check_hdf5.hpp"
#include "runtime/h5_handle.hpp"
#include "core/dtype_names.hpp"

namespace mpiaccel::detail {
namespace {

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

void check_name(const std::string& name) {
  MPIACCEL_CHECK(!name.empty() && name.front() != '/' && name.back() != '/' &&
                     name.find("//") == std::string::npos,
                 "checkpoint: tensor name '" + name +
                     "' is not a relative path like model/<fqn> or optim/<fqn>/<slot>");
  MPIACCEL_CHECK(name.compare(0, 5, "meta/") != 0 && name.compare(0, 4, "rng/") != 0 &&
                     name.compare(0, 8, "trainer/") != 0 && name.compare(0, 6, "types/") != 0,
                 "checkpoint: tensor name '" + name + "' uses a reserved group");
}

std::vector<LocalShard> prepare_local(const ShardedStateDict& state) {
  std::vector<LocalShard> shards;
  std::set<std::string> names;
  for (const auto& t : state.tensors) {
    check_name(t.name);
    MPIACCEL_CHECK(names.insert(t.name).second, "checkpoint: tensor " + t.name + " listed twice");
    const std::string where = "checkpoint: tensor " + t.name;
    MPIACCEL_CHECK(t.local.defined(),
                   where + ": local tensor is undefined (give a rank without rows an empty "
                           "tensor of the right dtype)");
    for (auto d : t.global_shape)
      MPIACCEL_CHECK(d >= 0, where + ": negative dimension in " + shape_text(t.global_shape));
    LocalShard s;
    s.tensor = &t;
    s.dtype = t.local.scalar_type();
    MPIACCEL_CHECK(checkpoint_dtype_supported(s.dtype),
                   where + ": dtype " + dtype_name(s.dtype) + " cannot be saved");
    s.rows = row_count_of(t.global_shape);
    s.row_bytes = row_bytes_of(t.global_shape, s.dtype);
    s.bytes = s.rows * s.row_bytes;
    MPIACCEL_CHECK(t.row_begin >= 0 && t.row_count >= 0 && t.row_begin + t.row_count <= s.rows,
                   where + ": rows [" + std::to_string(t.row_begin) + ", " +
                       std::to_string(t.row_begin + t.row_count) + ") outside its " +
                       std::to_string(s.rows) + " rows");
    MPIACCEL_CHECK(t.local.numel() * static_cast<int64_t>(t.local.element_size()) ==
                       t.row_count * s.row_bytes,
                   where + ": local tensor of shape " + shape_text(t.local.sizes().vec()) +
                       " does not hold rows [" + std::to_string(t.row_begin) + ", " +
                       std::to_string(t.row_begin + t.row_count) + ") of " +
                       shape_text(t.global_shape));
    // The CRC32C is computed later, on the copy staged for the disk (RawWriter).
    s.host = t.local.device().is_cpu() ? t.local.contiguous() : t.local.to(at::kCPU).contiguous();
    shards.push_back(std::move(s));
  }
  return shards;
}

std::string layout_of(const std::vector<LocalShard>& shards) {
  std::string text;
  for (const auto& s : shards)
    text += s.tensor->name + " " + dtype_name(s.dtype) + " " + shape_text(s.tensor->global_shape) + "\n";
  return text;
}

std::string first_difference(const std::string& mine, const std::string& reference) {
  std::istringstream a(mine), b(reference);
  std::string la, lb;
  for (int line = 0;; ++line) {
    const bool ha = static_cast<bool>(std::getline(a, la));
    const bool hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) return "";
    if (la != lb || ha != hb)
      return "tensor #" + std::to_string(line) + " is '" + (ha ? la : "(none)") +
             "' here but '" + (hb ? lb : "(none)") + "' on rank 0";
  }
}

void check_world(MPI_Comm world, const Communicator& comm, int64_t step) {
  int world_size = 0;
  MPI_Comm_size(world, &world_size);  // local
  MPIACCEL_CHECK(world_size == comm.size(),
                 "checkpoint: the communicator has " + std::to_string(comm.size()) +
                     " ranks but the world has " + std::to_string(world_size) +
                     "; checkpoints are written by the whole world");
  MPIACCEL_CHECK(step >= 0, "checkpoint: negative step " + std::to_string(step));
}

// Rank 0's tensor list and metadata, for every rank; a rank whose list
// differs fails the save on every rank. Collective over comm.
SharedPlan agree_on_plan(Communicator& comm, const std::vector<LocalShard>& shards,
                         const ShardedStateDict& state, const CheckpointMeta& meta) {
  SharedPlan mine;
  mine.layout = layout_of(shards);
  mine.strategy = meta.strategy;
  mine.config_text = meta.config_text;
  mine.created_utc = utc_now();
  mine.trainer = meta.trainer;
  mine.attributes = state.attributes;
  SharedPlan plan = SharedPlan::decode(comm.broadcast_bytes(mine.encode(), 0));
  const std::string difference = first_difference(mine.layout, plan.layout);
  all_ok(comm, difference.empty(),
         "checkpoint: ranks save different tensor lists: " + difference);
  return plan;
}

// This rank's shard records (CRCs still 0), the tensor of each, and the
// longest name + 1 (the table's name field).
void add_my_records(WriteInput& in) {
  const auto& shards = *in.shards;
  for (size_t i = 0; i < shards.size(); ++i) {
    const LocalShard& s = shards[i];
    in.name_length = std::max(in.name_length, s.tensor->name.size() + 1);
    const ShardedTensor& t = *s.tensor;
    if (t.row_count > 0 || (s.rows == 0 && in.rank == 0)) {  // a tensor without rows still has a record
      in.my_records.push_back({t.name, in.rank, t.row_begin, t.row_count, 0});
      in.record_tensor.push_back(i);
    }
  }
}

// Every rank's RNG blob size (each rank creates every /rng/<rank> dataset).
std::vector<int64_t> gather_rng_sizes(Communicator& comm, const std::string& rng_state) {
  ByteWriter size;
  size.i64(static_cast<int64_t>(rng_state.size()));
  std::vector<int64_t> sizes;
  for (const auto& bytes : comm.all_gather_bytes(size.take())) {
    ByteReader r(bytes);
    sizes.push_back(r.i64());
  }
  return sizes;
}

// Rank 0: the directory exists, the tensors fit on its disk, and no leftover
// of a crashed save of the same step is in the way.
void prepare_directory(const std::string& dir, int64_t step, const std::vector<LocalShard>& shards,
                       const std::string& tmp_path) {
  make_directories(dir);
  int64_t needed = 0;
  for (const auto& s : shards) needed += s.bytes;
  const int64_t available = available_bytes(dir);
  MPIACCEL_CHECK(available < 0 || needed <= available,
                 "not enough space for checkpoint step " + std::to_string(step) + " in " + dir +
                     ": it needs " + std::to_string(needed) + " bytes, " +
                     std::to_string(available) + " are free (No space left on device)");
  file_system().unlink(tmp_path.c_str());
}

// Rank 0: rename, fsync, latest; then retention, only after the commit: a
// failed save never costs an older checkpoint. Best effort: what cannot be
// removed now is retried next time.
void commit_and_prune(const std::string& dir, int64_t step, int64_t keep_last) {
  commit_checkpoint(dir, temporary_file_name(step), checkpoint_file_name(step));
  for (const auto& removed : prune_checkpoints(dir, keep_last))
    log_debug("checkpoint: removed " + removed);
}

}  // namespace

std::string save_checkpoint(MPI_Comm world, Communicator& comm, const std::string& dir,
                            int64_t keep_last, const ShardedStateDict& state, int64_t step,
                            const CheckpointMeta& meta) {
  const Hdf5Lock hdf5(hdf5_mutex());  // the whole save/load: see h5_handle.hpp
  silence_hdf5_errors();
  check_world(world, comm, step);
  const bool rank0 = comm.rank() == 0;
  CollectivePhases phases(comm);
  std::vector<LocalShard> shards;
  phases.run("prepare", [&] { shards = prepare_local(state); });  // phase 1

  // Phase 2.
  const SharedPlan plan = agree_on_plan(comm, shards, state, meta);
  std::string file_timing;
  WriteInput in;
  in.world = world;
  in.rank = comm.rank();
  in.size = comm.size();
  in.step = step;
  in.dir = dir;
  in.tmp_path = join_path(dir, temporary_file_name(step));
  in.shards = &shards;
  in.plan = &plan;
  in.rng_state = &meta.rng_state;
  in.timing = &file_timing;
  add_my_records(in);
  // Where each record goes in the table; every tensor's rows held exactly once.
  in.table = plan_shard_table(world, comm, shards, in.my_records, in.record_tensor);
  in.rng_sizes = gather_rng_sizes(comm, meta.rng_state);
  phases.run("agree", [&] {
    if (rank0) prepare_directory(dir, step, shards, in.tmp_path);
  });

  try {
    write_file(comm, in);  // phases 3 and 4
    phases.lap("file");
    phases.run("commit", [&] {
      if (rank0) commit_and_prune(dir, step, keep_last);
    });
    char text[64];
    std::snprintf(text, sizeof text, "checkpoint: step %lld saved in %.3f s (",
                  static_cast<long long>(step), phases.elapsed());
    log_debug(text + phases.laps_text() + "); file: " + file_timing);
  } catch (...) {
    if (rank0) file_system().unlink(in.tmp_path.c_str());
    throw;
  }
  return join_path(dir, checkpoint_file_name(step));
}

}  // namespace mpiaccel::detail
