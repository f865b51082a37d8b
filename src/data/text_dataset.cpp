// Byte-level text: a directory of files read into one byte tensor, cut into
// fixed windows. Bytes are the tokens (vocabulary 256), so no tokenizer is
// needed and any text file works.

#include <ATen/ATen.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "mpiaccel/datasets.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {
namespace fs = std::filesystem;

namespace {

std::string install_hint(const std::string& dir) {
  return dir == kFortunesDir
             ? "install it with `apt-get install fortunes`, or set [train] data_dir"
             : "set [train] data_dir to a directory of text files (the default, " +
                   std::string(kFortunesDir) + ", comes with `apt-get install fortunes`)";
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The files whose bytes make the corpus, in name order so that every rank and
// every run concatenates them identically.
std::vector<fs::path> corpus_files(const std::string& dir) {
  std::error_code ec;
  MPIACCEL_CHECK(fs::is_directory(dir, ec),
                 "dataset directory " + dir + " not found: " + install_hint(dir));
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(it->path());
  }
  MPIACCEL_CHECK(!ec, "cannot list dataset directory " + dir + ": " + ec.message());
  std::sort(entries.begin(), entries.end());

  std::vector<fs::path> files;
  std::set<fs::path> seen;  // canonical targets: Debian's *.u8 are symlinks to the plain files
  for (const fs::path& path : entries) {
    const std::string name = path.filename().string();
    // .dat files are strfile(1) binary indexes of the fortune files, not text.
    if (name.empty() || name[0] == '.' || ends_with(name, ".dat")) continue;
    if (!fs::is_regular_file(path, ec)) continue;  // directories, dangling links, devices
    fs::path target = fs::canonical(path, ec);
    if (ec || !seen.insert(target).second) continue;
    files.push_back(path);
  }
  return files;
}

}  // namespace

at::Tensor read_text_corpus(const std::string& dir) {
  std::vector<char> bytes;
  for (const fs::path& path : corpus_files(dir)) {
    std::ifstream in(path, std::ios::binary);
    MPIACCEL_CHECK(in.good(), "cannot open " + path.string() + ": " + std::strerror(errno));
    bytes.insert(bytes.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    MPIACCEL_CHECK(!in.bad(), "cannot read " + path.string());
  }
  MPIACCEL_CHECK(!bytes.empty(),
                 "dataset directory " + dir + " holds no text files: " + install_hint(dir));
  at::Tensor out = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(out.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return out;
}

at::Tensor text_split(const at::Tensor& bytes, const std::string& name, double val_fraction) {
  MPIACCEL_CHECK(name == "train" || name == "val",
                 "text dataset split '" + name + "' is unknown; accepted: train, val");
  MPIACCEL_CHECK(val_fraction >= 0.0 && val_fraction < 1.0,
                 "val_fraction " + std::to_string(val_fraction) + " is not in [0, 1)");
  const int64_t total = bytes.numel();
  const auto val_bytes =
      static_cast<int64_t>(std::llround(static_cast<double>(total) * val_fraction));
  const int64_t train_bytes = total - val_bytes;
  return name == "train" ? bytes.slice(0, 0, train_bytes) : bytes.slice(0, train_bytes, total);
}

TextDataset::TextDataset(at::Tensor bytes, int64_t seq_len)
    : bytes_(bytes.contiguous()), seq_len_(seq_len) {
  MPIACCEL_CHECK(bytes_.dim() == 1 && bytes_.scalar_type() == at::kByte && bytes_.device().is_cpu(),
                 "TextDataset: bytes must be a 1-D uint8 CPU tensor");
  MPIACCEL_CHECK(seq_len_ >= 1,
                 "TextDataset: seq_len must be at least 1, not " + std::to_string(seq_len_));
  MPIACCEL_CHECK(
      bytes_.numel() >= seq_len_ + 1,
      "TextDataset: " + std::to_string(bytes_.numel()) +
          " bytes are fewer than one sample of seq_len + 1 = " + std::to_string(seq_len_ + 1) +
          "; use a smaller seq_len or val_fraction, or more text");
  // Windows start every seq_len bytes and need one byte more for the target.
  size_ = (bytes_.numel() - 1) / seq_len_;
}

Batch TextDataset::get(const std::vector<int64_t>& indices) const {
  const auto count = static_cast<int64_t>(indices.size());
  at::Tensor input = at::empty({count, seq_len_}, at::kLong);
  at::Tensor target = at::empty({count, seq_len_}, at::kLong);
  const uint8_t* src = bytes_.data_ptr<uint8_t>();
  int64_t* in = input.data_ptr<int64_t>();
  int64_t* out = target.data_ptr<int64_t>();
  for (int64_t b = 0; b < count; ++b) {
    const int64_t i = indices[static_cast<size_t>(b)];
    MPIACCEL_CHECK(i >= 0 && i < size_, "TextDataset: sample " + std::to_string(i) +
                                            " is not in [0, " + std::to_string(size_) + ")");
    const uint8_t* window = src + i * seq_len_;
    for (int64_t t = 0; t < seq_len_; ++t) {
      in[b * seq_len_ + t] = window[t];
      out[b * seq_len_ + t] = window[t + 1];
    }
  }
  return {input, target};
}

}  // namespace mpiaccel
