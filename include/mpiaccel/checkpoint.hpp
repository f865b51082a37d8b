#pragma once
// Sharded checkpoints in one parallel HDF5 file (docs/checkpoint.md; the file's contract: docs/design.md, "Checkpoint file").
//
// Checkpointer::save writes a ShardedStateDict as DIR/.step_%08d.h5.tmp through
// MPI-IO (every rank writes its own dim-0 rows of every tensor at the tensor's
// full logical shape), then commits it by rename and points DIR/latest at it.
// Checkpointer::load reads every rank's rows back for any world size and any
// row layout, verifying the CRC32C of every saved shard it touches.
// CheckpointReader opens a committed file in one process, without MPI, for
// tools and for users who want the tensors outside a distributed job.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/state.hpp"

namespace mpiaccel {

class Communicator;
namespace detail {
struct FileComm;
class AsyncSave;
}

/// The "format_version" root attribute this build writes (and the newest it
/// reads; it reads every version from 1). 1: no /meta/shard_index; 2: with it
/// (docs/checkpoint.md, "Format versions").
constexpr int kCheckpointFormatVersion = 2;

/// What a checkpoint carries besides its tensors.
struct CheckpointMeta {
  int64_t step = 0;
  /// Saved world size. Ignored by save (the communicator's size is written).
  int world_size = 0;
  /// The strategy that wrote it ("ddp", "fsdp", ...), for the reader's information.
  std::string strategy;
  /// The resolved config text (/meta/config).
  std::string config_text;
  /// Trainer state as text (/trainer): epoch, samples seen, scheduler state, ...
  std::map<std::string, std::string> trainer;
  /// This rank's RNG state (/rng/<rank>, opaque bytes). On load it is filled
  /// only when the saved world size equals the current one; otherwise it is
  /// empty and the caller re-derives its generators (see docs/checkpoint.md).
  std::string rng_state;
  // Filled by load only:
  int format_version = 0;
  std::string mpiaccel_version;
  std::string torch_version;
  std::string created_utc;
  /// The committed file that was loaded.
  std::string path;
};

/// One saved shard: rows [first_row, first_row + rows) of a tensor, written by `rank`.
struct ShardInfo {
  int rank = 0;
  int64_t first_row = 0;
  int64_t rows = 0;
  uint32_t crc32c = 0;
};

/// One tensor of a checkpoint.
struct TensorInfo {
  std::string name;            ///< "model/<fqn>" or "optim/<fqn>/<slot>"
  std::vector<int64_t> shape;  ///< full logical shape ({} for a 0-d tensor)
  at::ScalarType dtype = at::kFloat;
  int64_t bytes = 0;
  std::vector<ShardInfo> shards;  ///< sorted by first_row
};

/// A checkpoint's manifest: everything except tensor data.
struct CheckpointInfo {
  std::string path;
  int format_version = 0;
  int64_t step = 0;
  int world_size = 0;
  std::string strategy;
  std::string mpiaccel_version;
  std::string torch_version;
  std::string created_utc;
  std::string config_text;
  std::map<std::string, std::string> trainer;
  /// ShardedStateDict::attributes (optimizer hyperparameters, ...).
  std::map<std::string, std::string> attributes;
  std::vector<TensorInfo> tensors;

  /// The tensor called `name`, or nullptr.
  const TensorInfo* find(const std::string& name) const;
};

/// Saves and loads checkpoints of one training job in one directory.
class Checkpointer {
 public:
  /// Checkpoints of the ranks of `comm` (an MPI or NCCL communicator): the
  /// files are opened over a duplicate of its MPI communicator, made here, so
  /// that HDF5's MPI-IO never interleaves with comm's own operations; `comm`
  /// agrees on errors. `keep_last` > 0 keeps that many committed checkpoints
  /// after each save; <= 0 keeps all. Collective over comm: every rank calls
  /// it, with no operation of comm in flight.
  Checkpointer(std::shared_ptr<Communicator> comm, std::string dir, int64_t keep_last);
  /// Waits for a save still in flight (logging, never throwing, its error).
  ~Checkpointer();

  /// Writes `state` as DIR/step_%08d.h5 (through DIR/.step_%08d.h5.tmp), then
  /// points DIR/latest at it and prunes to keep_last. Returns the committed
  /// path. Every rank passes the same tensor list (names, shapes, dtypes) and
  /// attributes; the ranks' row ranges of each tensor tile its rows. On any
  /// failure on any rank, every rank throws the same mpiaccel::Error and the
  /// previous checkpoint and `latest` are untouched. Creates DIR if needed.
  /// Collective over comm: every rank calls it, in the same order.
  std::string save(const ShardedStateDict& state, int64_t step, const CheckpointMeta& meta);
  /// save() in the background (docs/checkpoint.md, "Asynchronous save"): it
  /// waits for a save still in flight, copies every tensor of `state` into
  /// host staging buffers (the only time training stalls), and returns the
  /// path the save will commit while a thread of its own writes the copy.
  /// poll() or wait() take its result. Collective over comm.
  std::string save_async(const ShardedStateDict& state, int64_t step, const CheckpointMeta& meta);
  /// At a step boundary: true when no save is in flight any more (a finished
  /// one is joined, and its error thrown on every rank), false while it
  /// writes. Collective over comm while a save is in flight; free otherwise.
  bool poll();
  /// Waits for a save in flight and throws its error on every rank (before
  /// pre-emption exits, at the end of training). Collective over comm.
  void wait();
  /// Whether a background save is in flight.
  bool saving() const;

  /// Reads a committed checkpoint (a file, or a directory's `latest`) into
  /// `targets`: each target's local tensor receives rows [row_begin,
  /// row_begin + row_count) of the saved tensor of the same name and global
  /// shape, whatever layout or world size saved it; targets.attributes
  /// receives the saved attributes. Every saved shard a rank reads from is
  /// checked against its CRC32C. A missing tensor, a shape mismatch or damaged
  /// data is an error on every rank. Targets may differ between ranks.
  /// Collective over comm: every rank calls it, in the same order.
  CheckpointMeta load(const std::string& path_or_dir, ShardedStateDict& targets);

  /// `[checkpoint] resume = latest`: dir() if it holds a committed
  /// checkpoint, else "" (a requeued job's first run). Rank 0 looks and every
  /// rank gets its answer. Collective over comm.
  std::string latest_source();

  /// The checkpoint a path names: a file as is, a directory through its `latest`.
  /// Throws mpiaccel::Error if there is none. Local (no communication).
  static std::string resolve(const std::string& path_or_dir);

  /// Committed checkpoints in `dir` (step_*.h5), oldest first. Local.
  static std::vector<std::string> list(const std::string& dir);

  const std::string& dir() const { return dir_; }

 private:
  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<detail::FileComm> file_comm_;  // MPI-IO's own duplicate of comm's MPI communicator
  std::shared_ptr<Communicator> writer_comm_;    // a background save's agreements, over its own duplicate
  std::shared_ptr<detail::AsyncSave> async_;
  std::string dir_;
  int64_t keep_last_;
};

/// A committed checkpoint opened in this process alone (no MPI needed).
class CheckpointReader {
 public:
  /// Opens `path_or_dir` (see Checkpointer::resolve) and reads its manifest.
  /// Throws mpiaccel::Error for anything that is not a complete mpiaccel checkpoint.
  explicit CheckpointReader(const std::string& path_or_dir);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const CheckpointInfo& info() const;
  /// The whole tensor `name` (CPU, its saved dtype), shards CRC-checked.
  at::Tensor read(const std::string& name) const;
  /// Rows [first_row, first_row + rows) of tensor `name`, not CRC-checked.
  at::Tensor read_rows(const std::string& name, int64_t first_row, int64_t rows) const;
  /// Recomputes the CRC32C of every shard. Returns one line per problem
  /// ("model/w: rows [0, 4) written by rank 0: CRC32C 0x... != recorded 0x...");
  /// empty when intact.
  std::vector<std::string> verify() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// "float32", "bfloat16", ... (PyTorch's names) for the dtypes a checkpoint holds.
std::string checkpoint_dtype_name(at::ScalarType dtype);

}  // namespace mpiaccel
