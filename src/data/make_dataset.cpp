// The trainer's datasets by name ([train] dataset).

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {

std::shared_ptr<const Dataset> make_dataset(const std::string& name, const std::string& data_dir,
                                            const std::string& split, int64_t seq_len,
                                            double val_fraction) {
  MPIACCEL_CHECK(split == "train" || split == "val",
                 "dataset split '" + split + "' is unknown; accepted: train, val");
  if (name == "fortunes") {
    const std::string dir = data_dir.empty() ? kFortunesDir : data_dir;
    at::Tensor bytes = text_split(read_text_corpus(dir), split, val_fraction);
    MPIACCEL_CHECK(bytes.numel() >= seq_len + 1,
                   "the " + split + " split of " + dir + " has " + std::to_string(bytes.numel()) +
                       " bytes, fewer than one sample of seq_len + 1 = " +
                       std::to_string(seq_len + 1) + "; change [train] val_fraction or seq_len");
    return std::make_shared<TextDataset>(bytes, seq_len);
  }
  if (name == "fashion-mnist") {
    const std::string dir = data_dir.empty() ? kFashionMnistDir : data_dir;
    // Fashion-MNIST comes with its own held-out set; validation uses it.
    return std::make_shared<FashionMnistDataset>(dir, split == "train" ? "train" : "test");
  }
  MPIACCEL_THROW("dataset '" + name + "' is unknown; accepted: fortunes, fashion-mnist");
}

}  // namespace mpiaccel
