#pragma once
// Internal: the safetensors format (Hugging Face's): an 8-byte little-endian
// header length N, N bytes of JSON {name: {"dtype", "shape", "data_offsets":
// [begin, end]}, "__metadata__": {str: str}}, then the tensors' bytes back to
// back, offsets relative to the end of the header. Written here for
// `mpiaccel ckpt export`; read for `[model] init_from` and the exporter's
// round trip. A file that lies (a header longer than the file, offsets
// outside the data or overlapping, a shape whose bytes do not match, an
// unknown dtype) is refused with one line naming the file and what is wrong,
// before anything large is allocated or read.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mpiaccel::detail {

struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  int64_t begin = 0;  ///< offsets in the data section
  int64_t end = 0;
};

/// A safetensors file's header, checked against the file's size.
struct SafetensorsFile {
  std::string path;
  int64_t data_start = 0;  ///< file offset of the data section
  std::vector<SafetensorsEntry> entries;  ///< in header order
  std::map<std::string, std::string> metadata;

  /// Reads and checks the header of `path`. Throws mpiaccel::Error.
  static SafetensorsFile open(const std::string& path);
  /// The entry called `name`, or nullptr.
  const SafetensorsEntry* find(const std::string& name) const;
  /// Entry `e`'s values (a new CPU tensor).
  at::Tensor read(const SafetensorsEntry& e) const;
};

/// One tensor to write: its name, dtype and shape up front (the header comes
/// first), its values produced when their turn comes (a CPU tensor of that
/// dtype and shape), so a file of many tensors never holds them all at once.
struct SafetensorsItem {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  std::function<at::Tensor()> values;
};

/// Writes `items` with `metadata` to `path`, through `path`.tmp and a
/// rename. Throws mpiaccel::Error (and leaves no .tmp).
void write_safetensors(const std::string& path, const std::vector<SafetensorsItem>& items,
                       const std::map<std::string, std::string>& metadata);

/// "F32", "BF16", ... for a dtype safetensors names.
const char* safetensors_dtype_name(at::ScalarType dtype);

}  // namespace mpiaccel::detail
