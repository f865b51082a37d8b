// Hugging Face model directories (see hf_model.hpp).

#include "interop/hf_model.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "checkpoint/manifest/manifest.hpp"
#include "core/dtype_names.hpp"
#include "models/hf_architecture.hpp"
#include "interop/hf_tokenizer.hpp"
#include "interop/safetensors.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"

namespace mpiaccel::detail {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexFile = "model.safetensors.index.json";

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::trunc);
  file << text;
  MPIACCEL_CHECK(file.good(), "cannot write " + path.string());
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  MPIACCEL_CHECK(file.good(), "cannot open " + path.string());
  try {
    return nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& e) {
    MPIACCEL_THROW(path.string() + " is not valid JSON: " + e.what());
  }
}

// The tensors of a HF directory or a single file: HF name -> its file.
struct HfTensors {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, std::pair<const SafetensorsFile*, const SafetensorsEntry*>> by_name;

  explicit HfTensors(const std::string& path) {
    std::vector<fs::path> paths;
    if (fs::is_directory(path)) {
      const fs::path dir(path);
      if (fs::exists(dir / kIndexFile)) {
        const nlohmann::json index = read_json(dir / kIndexFile);
        MPIACCEL_CHECK(index.contains("weight_map") && index["weight_map"].is_object(),
                       (dir / kIndexFile).string() + " has no weight_map");
        std::map<std::string, int> shards;
        for (const auto& [name, file] : index["weight_map"].items()) {
          MPIACCEL_CHECK(file.is_string() && file.get<std::string>().find('/') == std::string::npos,
                         (dir / kIndexFile).string() + ": tensor " + name + " names a bad file " + file.dump());
          shards.emplace(file.get<std::string>(), 0);
        }
        for (const auto& [file, unused] : shards) paths.push_back(dir / file);
      } else {
        MPIACCEL_CHECK(fs::exists(dir / "model.safetensors"),
                       path + " holds neither model.safetensors nor " + kIndexFile +
                           ": not a Hugging Face model directory in safetensors format");
        paths.push_back(dir / "model.safetensors");
      }
    } else {
      paths.push_back(path);
    }
    for (const fs::path& p : paths) {
      files.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(p.string())));
      for (const auto& e : files.back()->entries)
        MPIACCEL_CHECK(by_name.emplace(e.name, std::make_pair(files.back().get(), &e)).second,
                       "tensor " + e.name + " is in two files of " + path);
    }
  }
};

// The model tensors of a checkpoint, each as `arch` names and lays it out.
std::vector<SafetensorsItem> hf_items(const CheckpointReader& reader, const HfArchitecture& arch,
                                      std::vector<int64_t>* sizes) {
  const CheckpointInfo& info = reader.info();
  std::vector<SafetensorsItem> items;
  for (const TensorInfo& t : info.tensors) {
    if (t.name.compare(0, 6, "model/") != 0) continue;
    const HfTensorName hf = arch.to_hf(t.name.substr(6));
    MPIACCEL_CHECK(!hf.name.empty(), info.path + ": tensor " + t.name + " has no place in " + arch.hf_class);
    SafetensorsItem item;
    item.name = hf.name;
    item.dtype = t.dtype;
    item.shape = t.shape;
    if (hf.transposed) std::swap(item.shape[0], item.shape[1]);
    item.values = [&reader, name = t.name, transposed = hf.transposed] {
      at::Tensor values = reader.read(name);
      return transposed ? values.t().contiguous() : values;
    };
    items.push_back(std::move(item));
    sizes->push_back(t.bytes);
  }
  return items;
}

// Writes `items` as one model.safetensors, or shards of at most
// max_shard_bytes (a larger tensor alone) with their index.
std::vector<std::string> write_weights(const std::string& dir, const std::vector<SafetensorsItem>& items,
                                       const std::vector<int64_t>& sizes, int64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (in_shard > 0 && in_shard + sizes[i] > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += sizes[i];
    total += sizes[i];
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  std::vector<std::string> written;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    const std::string file = shards.size() == 1 ? "model.safetensors" : name;
    std::vector<SafetensorsItem> part;
    for (size_t i : shards[s]) {
      part.push_back(items[i]);
      weight_map[items[i].name] = file;
    }
    write_safetensors((fs::path(dir) / file).string(), part, metadata);
    written.push_back(file);
  }
  if (shards.size() > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    write_text(fs::path(dir) / kIndexFile, index.dump(2) + "\n");
    written.push_back(kIndexFile);
  } else {
    fs::remove(fs::path(dir) / kIndexFile);  // a stale index of an earlier export
  }
  return written;
}

}  // namespace

std::vector<std::string> export_hf_model(const CheckpointReader& reader, const std::string& dir,
                                         const HfExport& options) {
  const CheckpointInfo& info = reader.info();
  const Config config = Config::parse(info.config_text, info.path + ":/meta/config");
  const HfArchitecture& arch = hf_architecture(config.train.model);
  const TensorInfo* embedding = info.find(std::string("model/") + arch.embedding);
  MPIACCEL_CHECK(embedding && embedding->shape.size() == 2,
                 info.path + " holds no " + config.train.model + " token embedding (model/" + arch.embedding + ")");
  ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
  spec.vocab_size = embedding->shape[0];  // the data's, when it set the vocabulary

  std::vector<int64_t> sizes;
  const std::vector<SafetensorsItem> items = hf_items(reader, arch, &sizes);
  fs::create_directories(dir);
  std::vector<std::string> written = write_weights(dir, items, sizes, options.max_shard_bytes);
  nlohmann::ordered_json hf_config = arch.config_json(spec, config);
  hf_config["torch_dtype"] = dtype_name(embedding->dtype);  // as saved: float32, or bfloat16 under bf16 FSDP
  hf_config["mpiaccel_step"] = info.step;
  write_text(fs::path(dir) / "config.json", hf_config.dump(2) + "\n");
  written.push_back("config.json");
  const fs::path tokenizer = fs::path(config.train.data_dir) / "tokenizer.model";
  if (config.train.dataset != DatasetChoice::Tokens) return written;
  if (!fs::exists(tokenizer)) {
    log_warn("the run trained on token files but " + tokenizer.string() + " is not there (a data_dir relative to "
             "where it ran?): the export has no tokenizer; run the export from that directory");
    return written;
  }
  for (const std::string& file : export_hf_tokenizer(tokenizer.string(), dir)) written.push_back(file);
  return written;
}

namespace {

// A directory's config.json against `spec`, when there is one.
void check_hf_config(const HfArchitecture& arch, const ModelSpec& spec, const std::string& path) {
  const fs::path config = fs::path(path) / "config.json";
  if (!fs::is_directory(path) || !fs::exists(config)) return;
  std::ifstream file(config);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  MPIACCEL_CHECK(file.good() || file.eof(), "cannot read " + config.string());
  check_hf_config_text(arch, text, spec, config.string());
}

}  // namespace

void load_hf_model(torch::nn::Module& model, const std::string& kind, const ModelSpec& spec,
                   const std::string& path) {
  const HfArchitecture& arch = hf_architecture(kind);
  check_hf_config(arch, spec, path);
  const HfTensors hf(path);
  std::map<std::string, at::Tensor> ours;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) ours.emplace(item.key(), item.value());
  std::map<std::string, std::pair<const SafetensorsFile*, const SafetensorsEntry*>> found;
  for (const auto& [name, where] : hf.by_name) {
    bool unknown = false;
    const HfTensorName mine = arch.to_ours(name, spec, &unknown);
    MPIACCEL_CHECK(!unknown, path + ": tensor " + name + " is not a tensor of " + arch.hf_class +
                                 " this model has; init_from reads " + arch.hf_class + " weights");
    if (mine.name.empty()) continue;  // kept by them only (a tied head, mask buffers)
    MPIACCEL_CHECK(ours.count(mine.name), path + ": tensor " + name + " (ours: " + mine.name +
                                              ") has no place in this model: is [model] n_layer "
                                              "smaller than the file's?");
    found[mine.name] = where;
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, param] : ours) {
    auto it = found.find(name);
    MPIACCEL_CHECK(it != found.end(), path + " has no tensor for " + name + " (" + arch.hf_class + ": " +
                                          arch.to_hf(name).name + ")");
    const auto& [file, entry] = it->second;
    const bool transposed = arch.to_hf(name).transposed;
    std::vector<int64_t> shape = entry->shape;
    if (transposed && shape.size() == 2) std::swap(shape[0], shape[1]);
    MPIACCEL_CHECK(shape == param.sizes().vec(),
                   path + ": tensor " + entry->name + " of shape " + shape_text(entry->shape) +
                       " does not fit " + name + " of shape " + shape_text(param.sizes().vec()) +
                       (transposed ? " (GPT-2 stores it transposed)" : "") +
                       ": set [model] n_layer, n_embd, vocab_size and [train] seq_len to the file's");
    at::Tensor values = file->read(*entry);
    param.copy_(transposed ? values.t() : values);
  }
}

}  // namespace mpiaccel::detail
