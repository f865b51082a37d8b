// The trainer's datasets by name ([train] dataset), and the vocabulary they
// ask of a language model.

#include <ATen/core/Tensor.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>

#include "mpiaccel/config.hpp"
#include "mpiaccel/datasets.hpp"
#include "mpiaccel/token_data.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {
namespace {

namespace fs = std::filesystem;


std::string token_path(const TrainConfig& train, const std::string& split) {
  MPIACCEL_CHECK(!train.data_dir.empty(),
                 "[train] dataset = tokens needs [train] data_dir: the directory of train.tokens "
                 "and val.tokens (made by `mpiaccel data tokenize --output DIR`)");
  return (fs::path(train.data_dir) / (split + ".tokens")).string();
}

std::shared_ptr<const Dataset> make_hdf5(const TrainConfig& train, const std::string& split) {
  MPIACCEL_CHECK(!train.data_dir.empty(),
                 "[train] dataset = hdf5 needs [train] data_dir: an HDF5 file, or a directory "
                 "with train.h5 (and val.h5)");
  std::error_code ec;
  std::string file = train.data_dir;
  if (fs::is_directory(file, ec)) {
    const std::string val = (fs::path(file) / "val.h5").string();
    file = (fs::path(file) / "train.h5").string();
    // A separate validation file is used whole; without one, the tail of the
    // training file is held out, as for one file.
    if (fs::exists(val, ec)) {
      return std::make_shared<Hdf5Dataset>(split == "train" ? file : val, train.hdf5_inputs,
                                           train.hdf5_labels);
    }
  }
  const Hdf5Dataset probe(file, train.hdf5_inputs, train.hdf5_labels);
  const int64_t total = probe.file_rows();
  const auto val_rows =
      static_cast<int64_t>(std::llround(static_cast<double>(total) * train.val_fraction));
  const int64_t train_rows = total - val_rows;
  MPIACCEL_CHECK(val_rows >= 1 && train_rows >= 1,
                 "HDF5 file " + file + ": " + std::to_string(total) + " rows with val_fraction " +
                     std::to_string(train.val_fraction) + " leave " + std::to_string(train_rows) +
                     " for training and " + std::to_string(val_rows) +
                     " for validation; each needs at least one: change [train] val_fraction");
  return split == "train"
             ? std::make_shared<Hdf5Dataset>(file, train.hdf5_inputs, train.hdf5_labels, 0, train_rows)
             : std::make_shared<Hdf5Dataset>(file, train.hdf5_inputs, train.hdf5_labels, train_rows,
                                             val_rows);
}

std::shared_ptr<const Dataset> make_fortunes(const TrainConfig& train, const std::string& split) {
  const std::string dir = train.data_dir.empty() ? kFortunesDir : train.data_dir;
  at::Tensor bytes = text_split(read_text_corpus(dir), split, train.val_fraction);
  MPIACCEL_CHECK(bytes.numel() >= train.seq_len + 1,
                 "the " + split + " split of " + dir + " has " + std::to_string(bytes.numel()) +
                     " bytes, fewer than one sample of seq_len + 1 = " + std::to_string(train.seq_len + 1) +
                     "; change [train] val_fraction or seq_len");
  return std::make_shared<TextDataset>(bytes, train.seq_len);
}

}  // namespace

std::shared_ptr<const Dataset> make_dataset(const TrainConfig& train, const std::string& split) {
  MPIACCEL_CHECK(split == "train" || split == "val",
                 "dataset split '" + split + "' is unknown; accepted: train, val");
  switch (train.dataset) {
    case DatasetChoice::Fortunes: return make_fortunes(train, split);
    case DatasetChoice::FashionMnist: {
      const std::string dir = train.data_dir.empty() ? kFashionMnistDir : train.data_dir;
      // Fashion-MNIST comes with its own held-out set; validation uses it.
      return std::make_shared<FashionMnistDataset>(dir, split == "train" ? "train" : "test");
    }
    case DatasetChoice::Tokens:
      // The tokenizer made the split; val_fraction is not used here.
      return std::make_shared<TokenDataset>(token_path(train, split), train.seq_len);
    case DatasetChoice::Hdf5: return make_hdf5(train, split);
  }
  MPIACCEL_THROW("unreachable dataset choice");
}

std::shared_ptr<const Dataset> make_dataset(const std::string& name, const std::string& data_dir,
                                            const std::string& split, int64_t seq_len,
                                            double val_fraction) {
  TrainConfig train;
  train.dataset = choice_named<DatasetChoice>(name, "dataset");
  train.data_dir = data_dir;
  train.seq_len = seq_len;
  train.val_fraction = val_fraction;
  return make_dataset(train, split);
}

int64_t dataset_vocab_size(const TrainConfig& train) {
  if (train.dataset == DatasetChoice::Fortunes) return 256;
  if (train.dataset == DatasetChoice::Tokens) return TokenFile(token_path(train, "train")).vocab_size();
  return 0;
}

void check_model_vocab_size(const TrainConfig& train, int64_t model_vocab_size) {
  const int64_t needed = dataset_vocab_size(train);
  if (train.dataset == DatasetChoice::Tokens) {
    MPIACCEL_CHECK(model_vocab_size >= needed,
                   "[model] vocab_size " + std::to_string(model_vocab_size) +
                       " is smaller than the vocabulary " + std::to_string(needed) + " of " +
                       token_path(train, "train") + "; set model.vocab_size = " +
                       std::to_string(needed));
  } else {
    MPIACCEL_CHECK(model_vocab_size >= needed,
                   "[model] vocab_size " + std::to_string(model_vocab_size) +
                       " is smaller than the " + std::to_string(needed) + " symbols of [train] "
                       "dataset = " + name_of(train.dataset) + "; set model.vocab_size = " +
                       std::to_string(needed));
  }
}

}  // namespace mpiaccel
