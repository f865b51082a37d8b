#pragma once
// Each rank's own random stream for the draws of a parallel region: dropout
// on this rank's attention heads or sequence shard under tensor parallelism
// (Megatron's model-parallel RNG tracker). The Accelerator seeds it and
// keeps it in checkpoints; the tensor-parallel layers and the models draw
// from it (tp::RegionRng is this class).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace mpiaccel {

/// Runs the code between its construction and destruction on this rank's
/// own random stream (Megatron's model-parallel RNG tracker): the default
/// generator of `device` gets the stream's state, and gets its own back
/// after, while the stream keeps where it got to. Dropout inside a
/// tensor-parallel region (this rank's attention heads, a sequence shard)
/// then draws differently per rank, while dropout on replicated activations,
/// outside any guard, draws the same on every rank of the group (whose
/// default generators are seeded alike). Without seed(), for another
/// device's generator, and nested inside another guard it changes nothing.
/// The swap is process-wide: another thread drawing from the same default
/// generator meanwhile (none of mpiaccel's do) would draw from the stream.
class RegionRng {
 public:
  /// Seeds this rank's stream from the job's seed and its place: tensor-
  /// parallel rank `tp_rank` of data-parallel rank `dp_rank`.
  static void seed(uint64_t seed, int64_t dp_rank, int64_t tp_rank, at::Device device);
  /// The stream's state (undefined before seed() and after set_state({})),
  /// for activation checkpointing to replay a region's draws, for
  /// checkpoints, and to set it back or clear it.
  static at::Tensor state();
  static void set_state(const at::Tensor& state);

  explicit RegionRng(at::Device device);
  ~RegionRng();
  RegionRng(const RegionRng&) = delete;
  RegionRng& operator=(const RegionRng&) = delete;

 private:
  at::Device device_;
  at::Tensor saved_default_;
};

}  // namespace mpiaccel
