// libFuzzer harness: the Fashion-MNIST IDX reader (gzip or plain, as zlib
// reads both). The input is split at its first 4 bytes' count into the
// images file and the labels file of a train split; a batch of the first
// and last image is read. Any input must be read or refused with
// mpiaccel::Error; a crash, a sanitizer report or another exception is a
// finding.
//   tests/fuzz/run.sh builds it with clang -fsanitize=fuzzer,address,undefined.

#include <ATen/core/Tensor.h>

#include <cstring>

#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"
#include "support/scratch_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t images_bytes = 0;
  std::memcpy(&images_bytes, data, 4);
  data += 4;
  size -= 4;
  const size_t split = std::min<size_t>(images_bytes, size);
  mpiaccel::fuzz::write_scratch("train-images-idx3-ubyte.gz", data, split);
  mpiaccel::fuzz::write_scratch("train-labels-idx1-ubyte.gz", data + split, size - split);
  try {
    const mpiaccel::FashionMnistDataset dataset(mpiaccel::fuzz::scratch_dir(), "train");
    dataset.get({0, dataset.size() - 1});
  } catch (const mpiaccel::Error&) {
  }
  return 0;
}
