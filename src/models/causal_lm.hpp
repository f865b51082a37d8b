#pragma once
// What generation needs of a text model (the GPT, the Llama): a forward over
// new tokens that reads and extends a cache of each layer's keys and values,
// so each generated token costs one position's forward.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/pipeline_model.hpp"
#include "mpiaccel/tensor_parallel.hpp"

namespace mpiaccel::detail {

/// The keys and values of the positions seen so far, per layer:
/// [batch, kv heads, positions, head width]; undefined while empty.
class KvCache {
 public:
  explicit KvCache(size_t layers) : keys_(layers), values_(layers) {}

  /// Positions held (those of layer 0, which a forward extends first).
  int64_t length() const { return keys_.empty() || !keys_[0].defined() ? 0 : keys_[0].size(2); }
  void clear() {
    for (size_t i = 0; i < keys_.size(); ++i) keys_[i] = values_[i] = at::Tensor();
  }
  /// Appends the new positions' `key` and `value` to layer `layer`; returns
  /// the layer's whole keys and values.
  std::pair<at::Tensor, at::Tensor> append(size_t layer, const at::Tensor& key, const at::Tensor& value);

 private:
  std::vector<at::Tensor> keys_, values_;
};

/// A text model generate() can drive (include/mpiaccel/models.hpp).
class CausalLm {
 public:
  virtual ~CausalLm() = default;
  /// The longest context ([train] seq_len).
  virtual int64_t context_length() const = 0;
  /// Decoder layers (the cache's size).
  virtual int64_t layer_count() const = 0;
  /// The device of the parameters.
  virtual at::Device device() const = 0;
  /// Logits [B, T, vocab] of `tokens` [B, T], the positions right after the
  /// cache's; their keys and values are appended to `cache`.
  virtual at::Tensor forward_cached(const at::Tensor& tokens, KvCache& cache) = 0;
};

/// How a split model's layers run now (tensor_parallelize): the group (null
/// when the model is not split) and whether the residual stream is this
/// rank's sequence shard (sequence parallelism, outside generation); and
/// the context-parallel group when each sample's sequence is split over it
/// (context_parallelize, outside generation; null otherwise).
struct SplitContext {
  std::shared_ptr<Communicator> tp;
  bool sequence_sharded = false;
  std::shared_ptr<Communicator> cp;
  cp::Exchange cp_exchange = cp::Exchange::Ring;

  /// This rank's part of the tokens [B, T] a forward was given: its zigzag
  /// shard under context parallelism, else all of them.
  at::Tensor local_tokens(const at::Tensor& tokens) const;
  /// Causal attention of q [B, H, T, D] over k, v [B, kv, T, D] (kv divides
  /// H: each key/value head serves H/kv consecutive query heads): exchanged
  /// over the cp group under context parallelism (no dropout there), else
  /// heads_attention.
  at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool after_cache,
                       double dropout_p) const;

  /// The residual stream `x` into a tensor-parallel region: all-gathered
  /// along the sequence when sharded, else whole with its gradient summed.
  at::Tensor enter(const at::Tensor& x) const;
  /// A parameter every rank holds whole: on a sequence shard each rank's
  /// gradient is part of the whole, summed over the group.
  at::Tensor shared(const at::Tensor& param) const;
  /// Dropout of `x`: on a sequence shard from this rank's own stream
  /// (tp::RegionRng), on the whole stream from the group's common one.
  template <class Dropout>
  at::Tensor dropout(Dropout& d, const at::Tensor& x) const {
    if (!sequence_sharded || !d->is_training() || d->options.p() == 0.0) return d->forward(x);
    tp::RegionRng own_shard(x.device());
    return d->forward(x);
  }
};

/// A column-parallel style for a layer whose input the model brings into the
/// region itself (once for several layers: q, k, v; gate and up).
inline tp::Style colwise_in_region() {
  tp::Style style = tp::Style::colwise();
  style.input_in_region = true;
  return style;
}

/// Throws Error unless `value` ([model] `key`) divides by `ranks`
/// ([parallelism] tp_size); `why` says what the split needs.
void check_tp_divides(int64_t value, const std::string& key, int64_t ranks, const std::string& why);

/// What the GPT and the Llama share as text models: forward with and
/// without the cache through one run(), the token cross-entropy, the context
/// and layer counts of their spec, and the check of the tokens they are given.
/// Each declares its pipeline pieces (include/mpiaccel/pipeline_model.hpp).
class TextModel : public Model, public CausalLm, public PipelineModel {
 public:
  TextModel(const ModelSpec& spec, std::string name) : spec_(spec), name_(std::move(name)) {}

  /// Logits [B, T, vocab]; split over a tensor-parallel group, this rank's
  /// vocabulary slice [B, T, vocab/tp].
  at::Tensor forward(const at::Tensor& input) override { return run(input, nullptr); }
  /// Whole logits, also when split (generation samples from them).
  at::Tensor forward_cached(const at::Tensor& tokens, KvCache& cache) override;
  /// Logits [B, T, vocab] of `tokens`, whole also when split (whole_logits()).
  at::Tensor whole_logits(const at::Tensor& tokens);
  /// Mean cross-entropy over all B·T positions (vocabulary-parallel when
  /// split); under context parallelism over this rank's zigzag shard of
  /// `target` [B, T] (forward's output is that shard's logits).
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override;
  /// Splits the model over `group` by its plan (tensor_parallelize()).
  void parallelize(std::shared_ptr<Communicator> group, bool sequence_parallel);
  /// Splits each sample's sequence over `group` (context_parallelize()).
  void context_parallelize(std::shared_ptr<Communicator> group, cp::Exchange exchange);
  int64_t context_length() const override { return spec_.block_size; }
  int64_t layer_count() const override { return spec_.n_layer; }
  const ModelSpec& spec() const { return spec_; }

 protected:
  /// Logits of `input`, whose positions follow the cache's (none without one).
  virtual at::Tensor run(const at::Tensor& input, KvCache* cache) = 0;
  /// The position of input's first token; throws Error unless `input` is
  /// int64 tokens [batch, time] that end within block_size.
  int64_t first_position(const at::Tensor& input, const KvCache* cache) const;
  /// The model's tensor-parallel plan (module patterns and styles); and a
  /// check of the sizes a group of `ranks` must divide, throwing Error.
  virtual tp::Plan plan(int64_t ranks) const = 0;
  virtual void check_divisible(int64_t ranks) const = 0;
  /// After the plan split the layers: the modules that communicate
  /// themselves (attention, MLP) take the group.
  virtual void join(const std::shared_ptr<Communicator>& group) = 0;
  /// The split head's logits of the final hidden states `x` (the residual
  /// stream): x enters the region once; the weight is this rank's
  /// vocabulary rows.
  at::Tensor split_head(const at::Tensor& x, const at::Tensor& weight, const SplitContext& ctx) const;
  /// The context of a forward over `time` positions, all the tokens it was
  /// given (checks that the cp chunks and a sequence shard divide them).
  SplitContext split_context(int64_t time) const;
  /// The groups the model is split over, as a forward (or a pipeline
  /// stage's layer) uses them now: the residual stream sequence-sharded
  /// under sequence parallelism, the sequence split over cp; neither while
  /// tp::WholeSequence is active (generation).
  SplitContext current_context() const;
  /// The positions of the `time` tokens this rank's attention sees, the
  /// first at `first`: [first, first + time), or under context parallelism
  /// the global positions of this rank's zigzag shard.
  at::Tensor attention_positions(int64_t first, int64_t time, const SplitContext& ctx,
                                 const at::TensorOptions& options) const;
  /// The positions of the residual stream: attention_positions, this rank's
  /// tp shard of them when the sequence is sharded.
  at::Tensor positions_of(int64_t first, int64_t time, const SplitContext& ctx, const at::TensorOptions& options) const;

  const ModelSpec spec_;
  std::shared_ptr<Communicator> tp_;  ///< null until parallelize()
  bool sequence_parallel_ = false;
  std::shared_ptr<Communicator> cp_;  ///< null until context_parallelize()
  cp::Exchange cp_exchange_ = cp::Exchange::Ring;

 private:
  std::string name_;  // "GPT", "Llama": for errors
};

}  // namespace mpiaccel::detail
