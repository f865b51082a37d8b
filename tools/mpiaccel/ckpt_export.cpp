// `mpiaccel ckpt export`: a checkpoint as one safetensors file (8-byte
// little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}}, then the raw little-endian tensor bytes back to back).
// Tensors are consolidated (all shards) and keep their dtype, BF16 included.

#include "ckpt_helpers.hpp"

#include <cstdio>
#include <fstream>

#include "mpiaccel/error.hpp"

namespace mpiaccel::tool {
namespace {

const char* safetensors_dtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "F32";
    case at::kDouble: return "F64";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    case at::kLong: return "I64";
    case at::kInt: return "I32";
    case at::kShort: return "I16";
    case at::kChar: return "I8";
    case at::kByte: return "U8";
    case at::kBool: return "BOOL";
    default: MPIACCEL_THROW("no safetensors dtype for " + checkpoint_dtype_name(dtype));
  }
}

}  // namespace

void export_safetensors(const CheckpointReader& reader, const std::string& out, bool model_only) {
  const CheckpointInfo& info = reader.info();
  struct Entry {
    const TensorInfo* tensor;
    std::string key;
  };
  std::vector<Entry> entries;
  for (const auto& t : info.tensors) {
    if (model_only && t.name.compare(0, 6, "model/") != 0) continue;
    entries.push_back({&t, model_only ? t.name.substr(6) : t.name});
  }
  std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"source\":" + json_string(info.path) +
                       ",\"step\":\"" + std::to_string(info.step) + "\",\"strategy\":" +
                       json_string(info.strategy) + "}";
  int64_t offset = 0;
  for (const auto& e : entries) {
    header += "," + json_string(e.key) + ":{\"dtype\":\"" + safetensors_dtype(e.tensor->dtype) +
              "\",\"shape\":[";
    for (size_t i = 0; i < e.tensor->shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(e.tensor->shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + e.tensor->bytes) + "]}";
    offset += e.tensor->bytes;
  }
  header += "}";
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  while ((8 + header.size()) % 8 != 0) header += ' ';

  const std::string tmp = out + ".tmp";
  try {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    MPIACCEL_CHECK(file.good(), "cannot create " + tmp);
    const uint64_t length = header.size();
    unsigned char prefix[8];
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(length >> (8 * i));
    file.write(reinterpret_cast<const char*>(prefix), 8);
    file.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const auto& e : entries) {
      if (e.tensor->bytes == 0) continue;
      at::Tensor t = reader.read(e.tensor->name);  // CRC-checked
      file.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(e.tensor->bytes));
    }
    file.flush();
    MPIACCEL_CHECK(file.good(), "writing " + tmp + " failed (disk full?)");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) {
    std::remove(tmp.c_str());
    MPIACCEL_THROW("cannot rename " + tmp + " to " + out);
  }
}

}  // namespace mpiaccel::tool
