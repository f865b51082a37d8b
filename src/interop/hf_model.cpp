// Hugging Face GPT-2 directories (see hf_model.hpp).

#include "interop/hf_model.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "checkpoint/manifest.hpp"
#include "interop/safetensors.hpp"
#include "interop/hf_gpt2.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"

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

// GPT2Config for our GPT: sizes from the tensors, the rest from its config.
std::string gpt2_config(const CheckpointInfo& info, const Config& config) {
  const TensorInfo* wte = info.find("model/wte.weight");
  const TensorInfo* wpe = info.find("model/wpe.weight");
  int64_t layers = 0;
  while (info.find("model/blocks." + std::to_string(layers) + ".ln_1.weight")) ++layers;
  nlohmann::ordered_json c;
  c["architectures"] = {"GPT2LMHeadModel"};
  c["model_type"] = "gpt2";
  c["vocab_size"] = wte->shape[0];
  c["n_embd"] = wte->shape[1];
  c["n_positions"] = wpe->shape[0];
  c["n_ctx"] = wpe->shape[0];
  c["n_layer"] = layers;
  c["n_head"] = config.model.n_head;
  c["n_inner"] = nullptr;  // 4 x n_embd, as ours
  c["activation_function"] = config.model.activation == "gelu_tanh" ? "gelu_new" : "gelu";
  c["layer_norm_epsilon"] = 1e-5;
  c["resid_pdrop"] = config.model.dropout;
  c["embd_pdrop"] = config.model.dropout;
  c["attn_pdrop"] = config.model.dropout;
  c["initializer_range"] = 0.02;
  c["scale_attn_weights"] = true;
  c["tie_word_embeddings"] = true;
  c["use_cache"] = true;
  // No beginning or end-of-text token in our vocabularies (GPT-2's 50256
  // would be outside a byte-level one).
  c["bos_token_id"] = nullptr;
  c["eos_token_id"] = nullptr;
  c["torch_dtype"] = "float32";
  c["mpiaccel_step"] = info.step;
  return c.dump(2) + "\n";
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

}  // namespace

std::vector<std::string> export_hf_gpt2(const CheckpointReader& reader, const std::string& dir,
                                        const HfExport& options) {
  const CheckpointInfo& info = reader.info();
  MPIACCEL_CHECK(info.find("model/wte.weight") && info.find("model/wpe.weight"),
                 info.path + " holds no bundled GPT (model/wte.weight): only the GPT exports to "
                             "the Hugging Face GPT-2 format");
  const Config config = Config::parse(info.config_text, info.path + ":/meta/config");
  // Every tensor of ours, renamed and laid out as GPT-2 keeps it.
  std::vector<SafetensorsItem> items;
  std::vector<int64_t> sizes;
  for (const TensorInfo& t : info.tensors) {
    if (t.name.compare(0, 6, "model/") != 0) continue;
    const HfTensorName hf = hf_gpt2_name(t.name.substr(6));
    MPIACCEL_CHECK(!hf.name.empty(), info.path + ": tensor " + t.name + " has no place in GPT-2");
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
    sizes.push_back(t.bytes);
  }
  // Shards of at most max_shard_bytes (a tensor larger than that alone).
  std::vector<std::vector<size_t>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (in_shard > 0 && in_shard + sizes[i] > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += sizes[i];
    total += sizes[i];
  }
  fs::create_directories(dir);
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
  write_text(fs::path(dir) / "config.json", gpt2_config(info, config));
  written.push_back("config.json");
  const fs::path tokenizer = fs::path(config.train.data_dir) / "tokenizer.model";
  if (config.train.dataset == "tokens" && fs::exists(tokenizer)) {
    fs::copy_file(tokenizer, fs::path(dir) / "tokenizer.model", fs::copy_options::overwrite_existing);
    written.push_back("tokenizer.model");
  }
  return written;
}

void load_hf_gpt2(torch::nn::Module& gpt, const std::string& path) {
  const HfTensors hf(path);
  std::map<std::string, at::Tensor> ours;
  for (const auto& item : gpt.named_parameters(/*recurse=*/true)) ours.emplace(item.key(), item.value());
  std::map<std::string, std::pair<const SafetensorsFile*, const SafetensorsEntry*>> found;
  for (const auto& [name, where] : hf.by_name) {
    bool unknown = false;
    const HfTensorName mine = our_gpt_name(name, &unknown);
    MPIACCEL_CHECK(!unknown, path + ": tensor " + name + " is not a GPT-2 tensor this GPT has; "
                             "init_from reads GPT2LMHeadModel / GPT2Model weights");
    if (mine.name.empty()) continue;  // kept by HF only (tied head, mask buffers)
    MPIACCEL_CHECK(ours.count(mine.name), path + ": tensor " + name + " (ours: " + mine.name +
                                              ") has no place in this model: is [model] n_layer "
                                              "smaller than the file's?");
    found[mine.name] = where;
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, param] : ours) {
    auto it = found.find(name);
    MPIACCEL_CHECK(it != found.end(), path + " has no tensor for " + name + " (GPT-2: " +
                                          hf_gpt2_name(name).name + ")");
    const auto& [file, entry] = it->second;
    const bool transposed = hf_gpt2_name(name).transposed;
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
