// `mpiaccel ckpt export`: a checkpoint as one safetensors file (dtypes kept,
// BF16 included; the tensors consolidated from every shard), or as a Hugging
// Face model directory (src/interop/hf_model.hpp).

#include "ckpt_helpers.hpp"

#include "interop/safetensors.hpp"

namespace mpiaccel::tool {

void export_safetensors(const CheckpointReader& reader, const std::string& out, bool model_only) {
  const CheckpointInfo& info = reader.info();
  std::vector<detail::SafetensorsItem> items;
  for (const auto& t : info.tensors) {
    if (model_only && t.name.compare(0, 6, "model/") != 0) continue;
    detail::SafetensorsItem item;
    item.name = model_only ? t.name.substr(6) : t.name;
    item.dtype = t.dtype;
    item.shape = t.shape;
    item.values = [&reader, name = t.name] { return reader.read(name); };  // CRC-checked
    items.push_back(std::move(item));
  }
  detail::write_safetensors(out, items,
                            {{"format", "pt"},
                             {"source", info.path},
                             {"step", std::to_string(info.step)},
                             {"strategy", info.strategy}});
}

}  // namespace mpiaccel::tool
