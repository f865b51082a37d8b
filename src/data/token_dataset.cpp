// Windows of a token file: the token-id counterpart of TextDataset, with the
// same sample numbering, so the sampler, the loader and resume treat both alike.

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/token_data.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {

TokenDataset::TokenDataset(std::shared_ptr<const TokenFile> file, int64_t seq_len)
    : file_(std::move(file)), seq_len_(seq_len) {
  MPIACCEL_CHECK(file_ != nullptr, "TokenDataset: no token file");
  MPIACCEL_CHECK(seq_len_ >= 1,
                 "TokenDataset: seq_len must be at least 1, not " + std::to_string(seq_len_));
  MPIACCEL_CHECK(file_->size() >= seq_len_ + 1,
                 "token file " + file_->path() + " has " + std::to_string(file_->size()) +
                     " tokens, fewer than one sample of seq_len + 1 = " +
                     std::to_string(seq_len_ + 1) + "; use a smaller [train] seq_len or more text");
  // Windows start every seq_len ids and need one id more for the target.
  size_ = (file_->size() - 1) / seq_len_;
}

TokenDataset::TokenDataset(const std::string& path, int64_t seq_len)
    : TokenDataset(std::make_shared<const TokenFile>(path), seq_len) {}

Batch TokenDataset::get(const std::vector<int64_t>& indices) const {
  const auto count = static_cast<int64_t>(indices.size());
  at::Tensor input = at::empty({count, seq_len_}, at::kLong);
  at::Tensor target = at::empty({count, seq_len_}, at::kLong);
  int64_t* in = input.data_ptr<int64_t>();
  int64_t* out = target.data_ptr<int64_t>();
  std::vector<int64_t> window(static_cast<size_t>(seq_len_ + 1));
  for (int64_t b = 0; b < count; ++b) {
    const int64_t i = indices[static_cast<size_t>(b)];
    MPIACCEL_CHECK(i >= 0 && i < size_, "TokenDataset: sample " + std::to_string(i) +
                                            " is not in [0, " + std::to_string(size_) + ")");
    file_->read(i * seq_len_, seq_len_ + 1, window.data());
    std::copy(window.begin(), window.end() - 1, in + b * seq_len_);
    std::copy(window.begin() + 1, window.end(), out + b * seq_len_);
  }
  return {input, target};
}

}  // namespace mpiaccel
