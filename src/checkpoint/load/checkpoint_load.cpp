// Checkpointer::load. Rank 0 reads and checks the manifest with the serial
// driver and broadcasts it (H5Pset_all_coll_metadata_ops is a no-op in HDF5
// 1.10.8, so N ranks would otherwise each read every object header). Every
// rank then checks its targets against it, the ranks agree, and each rank
// reads its rows independently: targets may differ between ranks, so no
// rank waits on another's dataset list. Rank 0 also broadcasts each
// tensor's data address when the dataset is contiguous (as saves write it):
// those bytes are read raw (RawReader: O_DIRECT, reads in flight while the
// previous chunk is checksummed and copied), which skips the page cache
// (docs/checkpoint.md, "Load speed"); other datasets go through HDF5
// hyperslab reads. The file is also opened over MPI-IO, for those and the
// RNG datasets.
//
// CRC choice: a CRC covers one saved shard, and a rank's new row range need
// not align with the saved shards. Each rank therefore reads the smallest
// range of WHOLE saved shards covering its rows, checks every one of them,
// and copies out its rows. Every shard some rank needs is thus verified; the
// extra read is at most two partial shards per tensor and nothing when the
// layout is unchanged. On the raw path the CRCs are computed on the fly and
// only the rank's own rows are copied.
//
// Tensors that every rank loads whole are read once in all: each rank reads
// a slice and the ranks all-gather (replicated_load.hpp).

#include <ATen/core/Tensor.h>
#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "checkpoint/manifest/byte_codec.hpp"
#include "checkpoint/checkpoint_impl.hpp"
#include "checkpoint/collective_phases.hpp"
#include "checkpoint/save/commit.hpp"
#include "runtime/h5_handle.hpp"
#include "checkpoint/manifest/manifest_codec.hpp"
#include "checkpoint/manifest/manifest_reader.hpp"
#include "checkpoint/hdf5/parallel_file.hpp"
#include "checkpoint/load/raw_reader.hpp"
#include "checkpoint/load/replicated_load.hpp"
#include "checkpoint/plan/shard_exchange.hpp"
#include "checkpoint/load/tensor_io.hpp"
#include "mpiaccel/log.hpp"
#include "runtime/check_hdf5.hpp"
#include "core/dtype_names.hpp"

namespace mpiaccel::detail {
namespace {

// Throws if `target` cannot receive the saved tensor.
void check_target(const CheckpointInfo& info, const TensorInfo* saved, const ShardedTensor& target) {
  const std::string where = "checkpoint " + info.path;
  MPIACCEL_CHECK(saved != nullptr, where + " has no tensor " + target.name +
                                       " (a checkpoint of a different model or optimizer?)");
  MPIACCEL_CHECK(saved->shape == target.global_shape,
                 where + ": tensor " + target.name + " has shape " + shape_text(saved->shape) +
                     " in the checkpoint but " + shape_text(target.global_shape) +
                     " here (a checkpoint of a different model?)");
  const int64_t rows = row_count_of(saved->shape);
  MPIACCEL_CHECK(target.row_begin >= 0 && target.row_count >= 0 &&
                     target.row_begin + target.row_count <= rows,
                 where + ": tensor " + target.name + ": requested rows [" +
                     std::to_string(target.row_begin) + ", " +
                     std::to_string(target.row_begin + target.row_count) + ") outside its " +
                     std::to_string(rows) + " rows");
  if (target.row_count == 0) return;
  MPIACCEL_CHECK(target.local.defined(), where + ": tensor " + target.name +
                                             ": the target's local tensor is undefined");
  const at::ScalarType have = target.local.scalar_type();
  MPIACCEL_CHECK(have == saved->dtype ||
                     (at::isFloatingType(have) && at::isFloatingType(saved->dtype)),
                 where + ": tensor " + target.name + " is " + dtype_name(saved->dtype) +
                     " in the checkpoint but " + dtype_name(have) + " here");
  const int64_t want = target.row_count * row_bytes_of(saved->shape, saved->dtype) /
                       static_cast<int64_t>(c10::elementSize(saved->dtype));
  MPIACCEL_CHECK(target.local.numel() == want,
                 where + ": tensor " + target.name + ": local tensor of shape " +
                     shape_text(target.local.sizes().vec()) + " cannot hold rows [" +
                     std::to_string(target.row_begin) + ", " +
                     std::to_string(target.row_begin + target.row_count) + ") of " +
                     shape_text(saved->shape));
}

// Reads target.local's rows; every whole shard touched is CRC-checked.
void read_target(hid_t file, hid_t dxpl, const CheckpointInfo& info, const TensorInfo& saved,
                 ShardedTensor& target) {
  if (target.row_count == 0 || saved.bytes == 0) return;
  int64_t lo = 0, hi = 0;
  covering_shards(saved, target.row_begin, target.row_count, &lo, &hi);
  at::Tensor& local = target.local;
  const bool direct = lo == target.row_begin && hi == target.row_begin + target.row_count &&
                      local.device().is_cpu() && local.is_contiguous() &&
                      local.scalar_type() == saved.dtype;
  at::Tensor buffer = direct ? local : empty_rows(saved, hi - lo);
  H5Id dset(MPIACCEL_CHECK_HDF5(H5Dopen2(file, ("/" + saved.name).c_str(), H5P_DEFAULT)));  // independent
  read_rows(dset, saved, lo, hi - lo, buffer.data_ptr(), dxpl);  // independent
  const std::string damage = check_shard_crcs(saved, buffer.data_ptr(), lo, hi - lo, info.path);
  MPIACCEL_CHECK(damage.empty(), damage);
  if (direct) return;
  at::Tensor rows = saved.shape.empty() ? buffer : buffer.narrow(0, target.row_begin - lo, target.row_count);
  local.copy_(rows.view(local.sizes()));
}

// The same through RawReader at the dataset's address: the covering shards
// are streamed once, checksummed on the fly, and only the target's rows are
// copied out (into the target itself when it can take the bytes as they are).
void read_target_raw(RawReader& reader, int64_t offset, const CheckpointInfo& info,
                     const TensorInfo& saved, ShardedTensor& target) {
  if (target.row_count == 0 || saved.bytes == 0) return;
  at::Tensor& local = target.local;
  const bool in_place =
      local.device().is_cpu() && local.is_contiguous() && local.scalar_type() == saved.dtype;
  at::Tensor buffer = in_place ? local : empty_rows(saved, target.row_count);
  const std::string damage = read_rows_verified(reader, offset, saved, target.row_begin,
                                                target.row_count, buffer.data_ptr(), info.path);
  MPIACCEL_CHECK(damage.empty(), damage);
  if (!in_place) local.copy_(buffer.view(local.sizes()));
}

// What rank 0 reads and every rank needs.
struct LoadManifest {
  CheckpointInfo info;
  std::map<std::string, int64_t> raw_offsets;  // tensors readable without HDF5 (else -1)
  ShardIndex index;  // present: each rank fetches only the shard records it needs
};

// Rank 0: the manifest message, or the error that stops the load.
std::string read_manifest_message(const std::string& path_or_dir) {
  std::string manifest, offsets, index;
  const std::string error = error_message_of([&] {
    const std::string path = resolve_checkpoint(path_or_dir);
    H5Id file = open_checkpoint_file_serial(path);
    ShardIndex shard_index;
    const CheckpointInfo read = read_manifest_indexed(file, path, &shard_index);
    manifest = encode_manifest(read);
    index = encode_shard_index(shard_index);
    ByteWriter w;
    for (int64_t offset : raw_data_offsets(file, read)) w.i64(offset);
    offsets = w.take();
  });
  ByteWriter message;
  message.str(error);
  message.str(manifest);
  message.str(offsets);
  message.str(index);
  return message.take();
}

// Rank 0 reads the manifest and broadcasts it, or its error, which every rank
// throws. Collective over comm.
LoadManifest broadcast_manifest(Communicator& comm, const std::string& path_or_dir) {
  const std::string message =
      comm.broadcast_bytes(comm.rank() == 0 ? read_manifest_message(path_or_dir) : "", 0);
  ByteReader reader(message);
  const std::string error = reader.str();
  if (!error.empty()) MPIACCEL_THROW(error);  // the same on every rank
  LoadManifest m;
  m.info = decode_manifest(reader.str());
  const std::string offsets = reader.str();
  ByteReader r(offsets);
  for (const auto& t : m.info.tensors) m.raw_offsets[t.name] = r.i64();
  m.index = decode_shard_index(reader.str(), m.info.tensors.size());
  return m;
}

// The manifest's tensors by name: O(1) lookups, not O(tensors) each.
class SavedTensors {
 public:
  explicit SavedTensors(const CheckpointInfo& info) {
    for (const auto& t : info.tensors) by_name_[t.name] = &t;
  }
  const TensorInfo* find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<std::string, const TensorInfo*> by_name_;
};

// Drops the optional targets the checkpoint has no tensor of that name and
// shape for (the same decision on every rank: every rank read the same manifest).
void drop_absent_optional(const SavedTensors& saved, ShardedStateDict& targets) {
  auto& tensors = targets.tensors;
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [&](const ShardedTensor& target) {
                                 if (!target.optional) return false;
                                 const TensorInfo* found = saved.find(target.name);
                                 return found == nullptr || found->shape != target.global_shape;
                               }),
                tensors.end());
}

H5Id open_parallel(CollectivePhases& phases, MPI_Comm world, const std::string& path) {
  H5Id fapl = make_parallel_fapl(world);
  H5Id file;
  phases.run([&] {
    file = H5Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl));  // collective
    MPIACCEL_CHECK(file.valid(), "cannot open checkpoint " + path + ": " + hdf5_error_stack());
  });
  return file;
}

// Every target's rows; returns the RawReader used, if any (for its stats).
// Errors are recorded: the caller still closes the file with the others.
std::unique_ptr<RawReader> read_tensors(CollectivePhases& phases, Communicator& comm, hid_t file,
                                        const LoadManifest& m, const SavedTensors& saved,
                                        ShardedStateDict& targets) {
  std::unique_ptr<RawReader> raw;
  // Tensors every rank loads whole: each byte read once, by one rank.
  const std::vector<bool> replicated = replicated_targets(comm, m.info, m.raw_offsets, targets);
  std::set<std::string> shared;
  for (size_t i = 0; i < replicated.size(); ++i)
    if (replicated[i]) shared.insert(m.info.tensors[i].name);
  if (!shared.empty()) {
    phases.run([&] { raw = std::make_unique<RawReader>(m.info.path); });
    phases.record([&] { read_replicated(comm, *raw, m.info, m.raw_offsets, targets, replicated); });
  }
  H5Id dxpl = make_transfer_list(false);
  phases.record([&] {
    for (auto& target : targets.tensors) {
      if (shared.count(target.name)) continue;
      const int64_t offset = m.raw_offsets.at(target.name);
      if (offset < 0) {
        read_target(file, dxpl, m.info, *saved.find(target.name), target);
        continue;
      }
      if (!raw) raw = std::make_unique<RawReader>(m.info.path);
      read_target_raw(*raw, offset, m.info, *saved.find(target.name), target);
    }
  });
  return raw;
}

// This rank's /rng/<rank>, empty if the file has none.
std::string read_rng_state(hid_t file, int rank) {
  std::string state;
  const std::string name = "/rng/" + std::to_string(rank);
  if (H5Lexists(file, "/rng", H5P_DEFAULT) <= 0 || H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0)
    return state;
  H5Id dxpl = make_transfer_list(false);
  H5Id dset(MPIACCEL_CHECK_HDF5(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));  // independent
  H5Id space(MPIACCEL_CHECK_HDF5(H5Dget_space(dset)));
  state.resize(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  if (!state.empty())
    MPIACCEL_CHECK_HDF5(H5Dread(dset, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, dxpl,
                                state.data()));  // independent
  return state;
}

void log_load_times(const std::string& path, const CollectivePhases& phases,
                    const RawReader::Stats& st) {
  char text[200];
  std::snprintf(text, sizeof text,
                ": %.0f MiB O_DIRECT, %.0f MiB buffered, waiting for the disk %.3f, "
                "CRC+copy %.3f)",
                st.direct_bytes / 1048576.0, st.buffered_bytes / 1048576.0, st.wait_seconds,
                st.sink_seconds);
  char total[32];
  std::snprintf(total, sizeof total, "%.3f", phases.elapsed());
  log_debug("checkpoint: loaded " + path + " in " + total + " s (" + phases.laps_text() + text);
}

CheckpointMeta meta_of(const CheckpointInfo& info) {
  CheckpointMeta meta;
  meta.step = info.step;
  meta.world_size = info.world_size;
  meta.strategy = info.strategy;
  meta.config_text = info.config_text;
  meta.trainer = info.trainer;
  meta.format_version = info.format_version;
  meta.mpiaccel_version = info.mpiaccel_version;
  meta.torch_version = info.torch_version;
  meta.created_utc = info.created_utc;
  meta.path = info.path;
  return meta;
}

}  // namespace

CheckpointMeta load_checkpoint(MPI_Comm world, Communicator& comm, const std::string& path_or_dir,
                               ShardedStateDict& targets) {
  const Hdf5Lock hdf5(hdf5_mutex());  // the whole save/load: see h5_handle.hpp
  silence_hdf5_errors();
  CollectivePhases phases(comm);
  LoadManifest m = broadcast_manifest(comm, path_or_dir);
  phases.lap("manifest");
  const SavedTensors saved(m.info);
  drop_absent_optional(saved, targets);
  phases.run([&] {
    for (const auto& target : targets.tensors)
      check_target(m.info, saved.find(target.name), target);
  });
  H5Id file = open_parallel(phases, world, m.info.path);
  if (m.index.present) fetch_covering_shards(world, comm, file, m.info, m.index, targets);
  phases.lap("open");

  CheckpointMeta meta = meta_of(m.info);
  std::unique_ptr<RawReader> raw = read_tensors(phases, comm, file, m, saved, targets);
  // On another world size meta.rng_state stays empty: the caller decides what
  // replaces it (the Accelerator re-derives from (seed, step, rank) and logs that).
  if (m.info.world_size == comm.size())
    phases.record([&] { meta.rng_state = read_rng_state(file, comm.rank()); });
  phases.run("tensor data and close", [&] {
    const herr_t rc = H5Fclose(file.release());  // collective
    MPIACCEL_CHECK(rc >= 0, "closing checkpoint " + m.info.path + " failed: " + hdf5_error_stack());
  });
  if (raw) log_load_times(m.info.path, phases, raw->stats());
  targets.attributes = m.info.attributes;
  return meta;
}

}  // namespace mpiaccel::detail
