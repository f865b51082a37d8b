// safetensors reading and writing (see safetensors.hpp).

#include "interop/safetensors.hpp"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <limits>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// A header is JSON text about the tensors, not data: anything beyond this
// is a lie (the reference implementation's limit is 100 MB).
constexpr int64_t kMaxHeaderBytes = int64_t{100} << 20;

const std::vector<std::pair<const char*, at::ScalarType>>& dtype_table() {
  static const std::vector<std::pair<const char*, at::ScalarType>> table = {
      {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
      {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
      {"U8", at::kByte},    {"BOOL", at::kBool}};
  return table;
}

[[noreturn]] void lie(const std::string& path, const std::string& what) {
  MPIACCEL_THROW(path + " is not a valid safetensors file: " + what);
}

int64_t file_size(std::ifstream& file) {
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  file.seekg(0, std::ios::beg);
  return static_cast<int64_t>(size);
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name,
                             const nlohmann::json& spec, int64_t data_bytes) {
  const std::string where = "tensor '" + name + "'";
  if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") ||
      !spec.contains("data_offsets"))
    lie(path, where + " lacks dtype, shape or data_offsets");
  SafetensorsEntry e;
  e.name = name;
  const auto& dtype = spec["dtype"];
  bool known = false;
  if (dtype.is_string())
    for (const auto& [text, type] : dtype_table())
      if (dtype.get<std::string>() == text) {
        e.dtype = type;
        known = true;
      }
  if (!known) lie(path, where + " has an unknown dtype " + dtype.dump());
  const auto& shape = spec["shape"];
  if (!shape.is_array() || shape.size() > 16) lie(path, where + " has a bad shape " + shape.dump());
  int64_t elements = 1;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) lie(path, where + " has a bad dimension " + d.dump());
    const uint64_t dim = d.get<uint64_t>();
    // Overflow-checked: a shape may claim more elements than any file holds.
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (dim != 0 && elements > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dim)))
      lie(path, where + " claims an impossible shape " + shape.dump());
    elements *= static_cast<int64_t>(dim);
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  const auto& offsets = spec["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    lie(path, where + " has bad data_offsets " + offsets.dump());
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (begin > end || end > static_cast<uint64_t>(data_bytes))
    lie(path, where + " has data_offsets " + offsets.dump() + " outside the " +
                  std::to_string(data_bytes) + " data bytes");
  e.begin = static_cast<int64_t>(begin);
  e.end = static_cast<int64_t>(end);
  const int64_t item = static_cast<int64_t>(c10::elementSize(e.dtype));
  if (elements > std::numeric_limits<int64_t>::max() / item || e.end - e.begin != elements * item)
    lie(path, where + " holds " + std::to_string(e.end - e.begin) + " bytes, but its shape " +
                  shape.dump() + " of " + dtype.get<std::string>() + " needs another number");
  return e;
}

}  // namespace

const char* safetensors_dtype_name(at::ScalarType dtype) {
  for (const auto& [text, type] : dtype_table())
    if (type == dtype) return text;
  MPIACCEL_THROW(std::string("safetensors has no dtype for ") + c10::toString(dtype));
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  MPIACCEL_CHECK(file.good(), "cannot open " + path);
  const int64_t size = file_size(file);
  if (size < 8) lie(path, "it is " + std::to_string(size) + " bytes long, shorter than its length prefix");
  unsigned char prefix[8];
  file.read(reinterpret_cast<char*>(prefix), 8);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | prefix[i];
  if (length > static_cast<uint64_t>(kMaxHeaderBytes) || static_cast<int64_t>(length) > size - 8)
    lie(path, "its header claims " + std::to_string(length) + " bytes, the file has " +
                  std::to_string(size - 8) + " after the prefix");
  std::string text(static_cast<size_t>(length), '\0');
  file.read(text.data(), static_cast<std::streamsize>(length));
  MPIACCEL_CHECK(file.good(), "reading the header of " + path + " failed");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    lie(path, std::string("its header is not JSON (") + e.what() + ")");
  }
  if (!header.is_object()) lie(path, "its header is not a JSON object");
  SafetensorsFile out;
  out.path = path;
  out.data_start = 8 + static_cast<int64_t>(length);
  const int64_t data_bytes = size - out.data_start;
  for (const auto& [name, spec] : header.items()) {
    if (name == "__metadata__") {
      if (!spec.is_object()) lie(path, "__metadata__ is not an object");
      for (const auto& [key, value] : spec.items())
        if (value.is_string()) out.metadata[key] = value.get<std::string>();
      continue;
    }
    out.entries.push_back(parse_entry(path, name, spec, data_bytes));
  }
  // No two tensors may share bytes.
  std::vector<const SafetensorsEntry*> sorted;
  for (const auto& e : out.entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->begin < sorted[i - 1]->end)
      lie(path, "tensors '" + sorted[i - 1]->name + "' and '" + sorted[i]->name + "' overlap");
  return out;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const auto& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

at::Tensor SafetensorsFile::read(const SafetensorsEntry& e) const {
  at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
  if (e.end == e.begin) return t;
  std::ifstream file(path, std::ios::binary);
  file.seekg(data_start + e.begin);
  file.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(e.end - e.begin));
  MPIACCEL_CHECK(file.good(), "reading tensor '" + e.name + "' of " + path + " failed (the file "
                                  "shrank while it was read?)");
  return t;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsItem>& items,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  std::vector<int64_t> sizes;
  for (const SafetensorsItem& item : items) {
    int64_t bytes = static_cast<int64_t>(c10::elementSize(item.dtype));
    for (int64_t d : item.shape) bytes *= d;
    header[item.name] = {{"dtype", safetensors_dtype_name(item.dtype)},
                         {"shape", item.shape},
                         {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    sizes.push_back(bytes);
  }
  std::string text = header.dump();
  // The data section starts 8-byte aligned, as the reference writer pads it.
  while ((8 + text.size()) % 8 != 0) text += ' ';
  const std::string tmp = path + ".tmp";
  try {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    MPIACCEL_CHECK(file.good(), "cannot create " + tmp);
    unsigned char prefix[8];
    for (int i = 0; i < 8; ++i)
      prefix[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
    file.write(reinterpret_cast<const char*>(prefix), 8);
    file.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (size_t i = 0; i < items.size(); ++i) {
      if (sizes[i] == 0) continue;
      const at::Tensor t = items[i].values().contiguous();
      MPIACCEL_CHECK(t.device().is_cpu() && t.scalar_type() == items[i].dtype &&
                         t.sizes().vec() == items[i].shape,
                     "safetensors: tensor " + items[i].name + " came out other than announced");
      file.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(sizes[i]));
    }
    file.flush();
    MPIACCEL_CHECK(file.good(), "writing " + tmp + " failed (disk full?)");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    MPIACCEL_THROW("cannot rename " + tmp + " to " + path);
  }
}

}  // namespace mpiaccel::detail
