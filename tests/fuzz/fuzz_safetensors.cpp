// libFuzzer harness: the safetensors reader ([model] init_from, the
// exporter's round trip). The input is a whole file; every tensor the header
// lists is read. Any input must be read or refused with mpiaccel::Error
// before anything is read outside the file or sized beyond it; a crash, a
// sanitizer report or another exception is a finding.
//   tests/fuzz/run.sh builds it with clang -fsanitize=fuzzer,address,undefined.

#include <ATen/core/Tensor.h>

#include <cstdlib>

#include "interop/safetensors.hpp"
#include "mpiaccel/error.hpp"
#include "support/scratch_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpiaccel::fuzz::write_scratch("model.safetensors", data, size);
  try {
    const auto file = mpiaccel::detail::SafetensorsFile::open(path);
    for (const auto& entry : file.entries) {
      const at::Tensor t = file.read(entry);
      // What was read is exactly what the header promised, inside the file.
      if (t.numel() * static_cast<int64_t>(t.element_size()) != entry.end - entry.begin ||
          file.data_start + entry.end > static_cast<int64_t>(size))
        std::abort();
    }
  } catch (const mpiaccel::Error&) {
  }
  return 0;
}
