#pragma once
// The neutral description of distributed training state (docs/design.md, "Modules"
// `state`): every strategy describes its parameters, buffers and optimizer
// slots as tensors of a full logical shape of which this rank holds a range of
// dim-0 rows. The checkpoint module turns that into one HDF5 file and back, so
// any checkpoint loads into any strategy at any world size.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mpiaccel {

struct ShardedTensor {
  /// Path in the checkpoint: "model/<fqn>" or "optim/<fqn>/<slot>".
  std::string name;
  /// The full logical shape (all ranks' rows together).
  std::vector<int64_t> global_shape;
  /// This rank's rows of dim 0: [row_begin, row_begin + row_count). A 0-d
  /// tensor counts as one row. row_count may be 0.
  int64_t row_begin = 0;
  int64_t row_count = 0;
  /// On save: this rank's rows (shape [row_count, global_shape[1:]...]),
  /// contiguous. On load: the destination the rows are copied into.
  at::Tensor local;
  /// On load: skipped, `local` left as it is, when the checkpoint has no
  /// tensor of this name and global_shape (state another world size or
  /// configuration did not save, e.g. a DDP hook's per-rank error feedback).
  bool optional = false;
};

struct ShardedStateDict {
  std::vector<ShardedTensor> tensors;
  /// Small scalars and strings saved as attributes (optimizer hyperparameters,
  /// optimizer step, ...), identical on every rank.
  std::map<std::string, std::string> attributes;
};

/// Rows [begin, begin+count) of `rows` rows split as evenly as possible over
/// `parts` parts (the first rows % parts parts get one extra), part `index`.
struct RowRange {
  int64_t begin = 0;
  int64_t count = 0;
};
RowRange even_row_range(int64_t rows, int parts, int index);

/// torch.chunk semantics (FSDP2): every part gets ceil(rows/parts) rows except
/// the tail, which may be shorter or empty.
RowRange chunk_row_range(int64_t rows, int parts, int index);

}  // namespace mpiaccel
