// Fashion-MNIST from the original IDX files, gzip-compressed as distributed
// (Debian package dataset-fashion-mnist). IDX: a big-endian header (magic,
// then one count per dimension), then the raw uint8 data.

#include <ATen/ATen.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "mpiaccel/datasets.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {
namespace {

constexpr uint32_t kImagesMagic = 2051;  // uint8 data, 3 dimensions
constexpr uint32_t kLabelsMagic = 2049;  // uint8 data, 1 dimension
constexpr int64_t kRows = 28;
constexpr int64_t kCols = 28;
constexpr size_t kMaxIdxBytes = size_t{256} << 20;

std::vector<uint8_t> read_gzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  MPIACCEL_CHECK(file != nullptr, "cannot open " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> data;
  std::array<uint8_t, 1 << 16> chunk{};
  int got = 0;
  while ((got = gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0) {
    data.insert(data.end(), chunk.begin(), chunk.begin() + got);
    if (data.size() > kMaxIdxBytes) {  // a gzip bomb, or not Fashion-MNIST
      gzclose(file);
      MPIACCEL_THROW(path + " decompresses to more than " + std::to_string(kMaxIdxBytes >> 20) +
                     " MiB, more than any Fashion-MNIST file (47 MiB); is it the right file?");
    }
  }
  int code = Z_OK;
  std::string reason = got < 0 ? gzerror(file, &code) : "";
  gzclose(file);
  MPIACCEL_CHECK(
      got == 0, "cannot decompress " + path + ": " + reason + " (reinstall dataset-fashion-mnist)");
  return data;
}

uint32_t big_endian_u32(const std::vector<uint8_t>& data, size_t offset) {
  return (uint32_t{data[offset]} << 24) | (uint32_t{data[offset + 1]} << 16) |
         (uint32_t{data[offset + 2]} << 8) | uint32_t{data[offset + 3]};
}

// The IDX header's counts after checking magic and the file's length.
std::vector<int64_t> idx_dims(const std::vector<uint8_t>& data, uint32_t magic, size_t rank,
                              const std::string& path) {
  const size_t header = 4 + 4 * rank;
  MPIACCEL_CHECK(data.size() >= header, path + " is too short for an IDX header");
  const uint32_t found = big_endian_u32(data, 0);
  MPIACCEL_CHECK(found == magic, path + " has IDX magic number " + std::to_string(found) +
                                     ", expected " + std::to_string(magic) +
                                     " (is it the right file?)");
  std::vector<int64_t> dims;
  size_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    dims.push_back(big_endian_u32(data, 4 + 4 * d));
    MPIACCEL_CHECK(!__builtin_mul_overflow(elements, static_cast<size_t>(dims.back()), &elements),
                   path + "'s IDX header claims more elements than any file holds (a damaged or "
                          "hostile file)");
  }
  MPIACCEL_CHECK(data.size() == header + elements,
                 path + " holds " + std::to_string(data.size() - header) +
                     " data bytes but its header says " + std::to_string(elements) +
                     " (truncated download?)");
  return dims;
}

}  // namespace

FashionMnistDataset::FashionMnistDataset(const std::string& dir, const std::string& split) {
  MPIACCEL_CHECK(split == "train" || split == "test",
                 "Fashion-MNIST split '" + split + "' is unknown; accepted: train, test");
  std::error_code ec;
  const std::string hint = dir == kFashionMnistDir
                               ? "install it with `apt-get install dataset-fashion-mnist`, or "
                                 "set [train] data_dir"
                               : "set [train] data_dir to the directory of the IDX .gz files "
                                 "(Debian: apt-get install dataset-fashion-mnist)";
  MPIACCEL_CHECK(std::filesystem::is_directory(dir, ec),
                 "dataset directory " + dir + " not found: " + hint);
  const std::string prefix = dir + "/" + (split == "train" ? "train" : "t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  for (const std::string& path : {images_path, labels_path}) {
    MPIACCEL_CHECK(std::filesystem::is_regular_file(path, ec),
                   "Fashion-MNIST file " + path + " not found: " + hint);
  }

  const std::vector<uint8_t> images = read_gzip(images_path);
  const std::vector<int64_t> image_dims = idx_dims(images, kImagesMagic, 3, images_path);
  MPIACCEL_CHECK(image_dims[1] == kRows && image_dims[2] == kCols,
                 images_path + " has images of " + std::to_string(image_dims[1]) + "x" +
                     std::to_string(image_dims[2]) + ", expected 28x28");
  const std::vector<uint8_t> labels = read_gzip(labels_path);
  const std::vector<int64_t> label_dims = idx_dims(labels, kLabelsMagic, 1, labels_path);
  MPIACCEL_CHECK(image_dims[0] == label_dims[0],
                 images_path + " has " + std::to_string(image_dims[0]) + " images but " +
                     labels_path + " has " + std::to_string(label_dims[0]) + " labels");
  size_ = image_dims[0];
  MPIACCEL_CHECK(size_ > 0, images_path + " holds no images");

  // Pixels stay uint8 (a quarter of the float size) and are normalised per batch.
  images_ = at::empty({size_, kRows, kCols}, at::kByte);
  std::memcpy(images_.data_ptr<uint8_t>(), images.data() + 16,
              static_cast<size_t>(images_.numel()));
  labels_ = at::empty({size_}, at::kLong);
  int64_t* label = labels_.data_ptr<int64_t>();
  for (int64_t i = 0; i < size_; ++i) {
    label[i] = labels[8 + static_cast<size_t>(i)];
    MPIACCEL_CHECK(label[i] <= 9, labels_path + ": label " + std::to_string(label[i]) +
                                      " of image " + std::to_string(i) + " is not in 0..9");
  }
}

Batch FashionMnistDataset::get(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices) {
    MPIACCEL_CHECK(i >= 0 && i < size_, "FashionMnistDataset: sample " + std::to_string(i) +
                                            " is not in [0, " + std::to_string(size_) + ")");
  }
  at::Tensor index = at::tensor(indices, at::kLong);
  at::Tensor pixels = images_.index_select(0, index).to(at::kFloat);
  at::Tensor input = pixels.div_(255.0).sub_(kMean).div_(kStd).unsqueeze(1);
  return {input, labels_.index_select(0, index)};
}

}  // namespace mpiaccel
