#pragma once
// What the checkpoint tests (tests/mpi/test_checkpoint*.cpp) set up alike: a
// state dict cut from full tensors by a row layout, load targets of a layout,
// a step's metadata, a checkpoint directory every rank shares with a
// Checkpointer on it, and a check that every rank ended with the same text
// (the error message: support/scratch_dir.hpp error_of).
// Every rank computes the full tensors itself, so checking a load needs no
// extra communication.

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/state.hpp"
#include "support/mpi_test.hpp"
#include "support/scratch_dir.hpp"
#include "support/shared_dir.hpp"

namespace mpiaccel::test {

/// The rows this rank holds of a tensor with `rows` rows (dim 0; 0-d is one row).
using RowLayout = std::function<RowRange(int64_t rows)>;

/// The usual layout of a save: the rows in even parts, one per rank.
inline RowRange even_here(int64_t rows) { return even_row_range(rows, world().size(), world().rank()); }
/// Every row on every rank, as replicas load.
inline RowRange all_rows(int64_t rows) { return RowRange{0, rows}; }

inline int64_t rows_in(const std::vector<int64_t>& shape) { return shape.empty() ? 1 : shape[0]; }

/// A copy of rows `r` of `full`; a 0-d tensor is its one row (none: an empty tensor).
inline at::Tensor rows_of(const at::Tensor& full, RowRange r) {
  if (full.dim() == 0) return r.count ? full.clone() : at::empty({0}, full.options());
  return full.narrow(0, r.begin, r.count).clone();
}

/// This rank's part `name` of `full` under `layout`, ready to save.
inline ShardedTensor shard_of(const std::string& name, const at::Tensor& full,
                              const RowLayout& layout = even_here) {
  const std::vector<int64_t> shape = full.sizes().vec();
  const RowRange r = layout(rows_in(shape));
  return {name, shape, r.begin, r.count, rows_of(full, r)};
}

/// A zeroed load target `name` (`shape`, `dtype`) with this rank's rows under `layout`.
inline ShardedTensor target_of(const std::string& name, const std::vector<int64_t>& shape,
                               at::ScalarType dtype, const RowLayout& layout = all_rows) {
  const RowRange r = layout(rows_in(shape));
  const auto options = at::TensorOptions().dtype(dtype);
  at::Tensor local;
  if (shape.empty()) {
    local = r.count ? at::full({}, 0, options) : at::empty({0}, options);
  } else {
    std::vector<int64_t> rows = shape;
    rows[0] = r.count;
    local = at::zeros(rows, options);
  }
  return {name, shape, r.begin, r.count, local};
}

/// The metadata of a save at `step` by `strategy`.
inline CheckpointMeta meta_at(int64_t step, const std::string& strategy = "ddp") {
  CheckpointMeta meta;
  meta.step = step;
  meta.strategy = strategy;
  return meta;
}

/// A checkpoint directory every rank shares (`sub` under a fresh SharedDir,
/// removed when the test case ends) and a Checkpointer on it. Collective:
/// every rank makes it, in the same order.
struct CheckpointDir {
  explicit CheckpointDir(const std::string& tag, int64_t keep_last = 0, const std::string& sub = "")
      : root(tag), path(root.path + sub), ckpt(world_ptr(), path, keep_last) {}

  SharedDir root;
  std::string path;  ///< the Checkpointer's directory
  Checkpointer ckpt;
};

/// True on every rank iff every rank holds the same `text` (an error message).
inline bool same_on_every_rank(const std::string& text) {
  const auto all = world().all_gather_bytes(text);
  return std::all_of(all.begin(), all.end(), [&](const std::string& t) { return t == all[0]; });
}

}  // namespace mpiaccel::test
