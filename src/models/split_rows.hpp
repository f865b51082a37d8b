#pragma once
// A layer's parameters as one rank holds them under tensor parallelism of t
// ranks (docs/parallelism.md): the rows and row widths the strategies then
// shard along dim 0. Shared by the text families' closed forms
// (ModelFamily::footprint).

#include <cstdint>
#include <string>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/model_family.hpp"

namespace mpiaccel::detail {

inline constexpr int64_t kFp32 = 4;  ///< bytes of a float32

/// Throws Error unless [parallelism] tp_size `tp` divides [model] `key`'s `value`.
inline void check_tp_divides(int64_t value, const std::string& key, int64_t tp) {
  MPIACCEL_CHECK(value % tp == 0, "estimate-memory: [model] " + key + " " + std::to_string(value) +
                                      " does not divide by [parallelism] tp_size " + std::to_string(tp));
}

enum class LinearSplit {
  Whole,    ///< held whole by every rank (and every layer when t = 1)
  Colwise,  ///< output rows split: [out/t, in], bias [out/t]
  Rowwise,  ///< input columns split: [out, in/t], bias whole
  Fused3,   ///< q, k, v fused: each third split, held as [3, out/3/t·in], bias [3, out/3/t]
};

/// Appends a Linear [out, in] (with `bias`) as split by `split` over `t`
/// ranks; returns its elements on one rank.
inline int64_t add_split_linear(std::vector<ParamRows>& tensors, int64_t in, int64_t out, bool bias,
                                LinearSplit split, int64_t t) {
  if (t == 1) split = LinearSplit::Whole;
  const size_t first = tensors.size();
  switch (split) {
    case LinearSplit::Whole:
      tensors.push_back({out, in});
      if (bias) tensors.push_back({out, 1});
      break;
    case LinearSplit::Colwise:
      tensors.push_back({out / t, in});
      if (bias) tensors.push_back({out / t, 1});
      break;
    case LinearSplit::Rowwise:
      tensors.push_back({out, in / t});
      if (bias) tensors.push_back({out, 1});
      break;
    case LinearSplit::Fused3:
      tensors.push_back({3, out / 3 / t * in});
      if (bias) tensors.push_back({3, out / 3 / t});
      break;
  }
  int64_t elements = 0;
  for (size_t i = first; i < tensors.size(); ++i) elements += tensors[i].rows * tensors[i].row_numel;
  return elements;
}

}  // namespace mpiaccel::detail
