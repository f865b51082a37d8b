#pragma once
// What generation needs of a text model (the GPT, the Llama): a forward over
// new tokens that reads and extends a cache of each layer's keys and values,
// so each generated token costs one position's forward.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

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

}  // namespace mpiaccel::detail
