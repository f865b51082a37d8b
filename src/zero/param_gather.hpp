#pragma once
// The all-gather that follows a ZeRO step: every rank stepped only its rows
// of each parameter; the updated rows of all ranks are exchanged so every rank
// holds the whole model again.
//
// Parameters are grouped (in parameter order, per dtype and device) into
// buckets of allgather_bucket_mb; each bucket is one all_gather_uneven of a
// flat, rank-major buffer (block r = rank r's rows of every parameter of the
// bucket). At most two buckets are in flight: the next one is launched before
// the current one is copied out. Their buffers are two staging areas kept
// from step to step (bucket b uses area b % 2), each as large as the largest
// bucket: the extra memory is about two buckets, and no step allocates.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "state/shard_layout.hpp"

namespace mpiaccel {
class Communicator;
}

namespace mpiaccel::detail {

class ParamGather {
 public:
  ParamGather(std::vector<at::Tensor> params, std::vector<ParamShard> shards,
              std::shared_ptr<Communicator> comm, int64_t bucket_bytes);

  /// `own_rows[i]`: this rank's updated rows of parameter i (numel(rank)
  /// elements, any shape, device or dtype: a view into the parameter itself,
  /// or a host master copy). Rows of a view into the parameter are not copied
  /// back. Collective over comm: every rank calls it, in the same order.
  void gather(const std::vector<at::Tensor>& own_rows);

  /// Parameter indices per bucket.
  std::vector<std::vector<size_t>> bucket_assignment() const { return buckets_; }

 private:
  struct InFlight;
  InFlight launch(size_t bucket, const std::vector<at::Tensor>& own_rows);
  void finish(InFlight& flight, const std::vector<at::Tensor>& own_rows);
  /// `numel` elements of `options` at the start of `area` (one of the byte
  /// buffers below), which is reallocated only when too small or on another
  /// device.
  at::Tensor staging(at::Tensor& area, int64_t numel, const at::TensorOptions& options);

  std::vector<at::Tensor> params_;
  std::vector<ParamShard> shards_;
  std::shared_ptr<Communicator> comm_;
  std::vector<std::vector<size_t>> buckets_;
  at::Tensor input_areas_[2];   // bytes
  at::Tensor output_areas_[2];  // bytes
};

}  // namespace mpiaccel::detail
