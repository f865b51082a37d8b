// libFuzzer harness: the token file reader (its 32-byte header and the ids
// read through the mapping). The input is a whole file; a window at each end
// and in the middle is read. Any input must be read or refused with
// mpiaccel::Error; a crash, a sanitizer report or another exception is a
// finding.
//   tests/fuzz/run.sh builds it with clang -fsanitize=fuzzer,address,undefined.

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"
#include "support/scratch_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpiaccel::fuzz::write_scratch("train.tokens", data, size);
  try {
    const mpiaccel::TokenFile file(path);
    if (file.size() < 0 || file.vocab_size() < 1) std::abort();
    const int64_t window = std::min<int64_t>(file.size(), 16);
    std::vector<int64_t> ids(static_cast<size_t>(window) + 1);
    for (const int64_t start : {int64_t{0}, (file.size() - window) / 2, file.size() - window}) {
      try {
        file.read(start, window, ids.data());
      } catch (const mpiaccel::Error&) {  // an id not below the vocabulary
      }
    }
    file.read(file.size(), 1, ids.data());  // past the end: must be refused
    std::abort();
  } catch (const mpiaccel::Error&) {
  }
  return 0;
}
