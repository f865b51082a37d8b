// `mpiaccel train`: the bundled models and datasets, by their config names,
// given to mpiaccel::Trainer.

#include <torch/nn/module.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/model_family.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/pipeline.hpp"
#include "mpiaccel/strategy.hpp"
#include "mpiaccel/trainer.hpp"
#include "interop/hf_model.hpp"
#include "optim/optimizer_factory.hpp"
#include "trainer/builtin_model.hpp"
#include "runtime/activity.hpp"

namespace mpiaccel {
namespace {

// Bytes the model produced, made safe for a terminal.
std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) out += (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) ? char(c) : '?';
  return out;
}

// What the trainer does with a bundled model family, by what it reads.
struct BuiltinModel {
  const char* throughput_unit;  // "tok" (per seq_len sample) or "samples"
  bool classifies;              // logs val_acc
  bool generates_text;          // prints a sample at the end
};

// The names of the families that `have` a part, "gpt or llama".
std::string families_with(bool (*have)(const ModelFamily&)) {
  std::string names;
  for (const ModelFamily* family : model_families())
    if (have(*family)) names += std::string(names.empty() ? "" : " or ") + family->name;
  return names;
}

BuiltinModel builtin_model(const std::string& kind) {
  if (model_family(kind).input == ModelFamily::Input::Tokens) return {"tok", false, true};
  return {"samples", true, false};
}

// [fsdp] cpu_ram_efficient_loading (docs/fsdp.md "Memory-efficient init"):
// with a sharding strategy, ranks >= 1 build the model without memory and
// FSDP streams rank 0's shards to them. Units then start sharded and are
// gathered when the model runs them through units().run, so every unit the
// wrap policy picks must be one the model runs that way; otherwise (a policy
// that may pick other modules) every rank builds in full, and `why_not` says
// why. The answer is the same on every rank (config and model kind only).
bool deferred_init_allowed(const Config& config, std::string& why_not) {
  if (!shards_parameters(config) || !config.fsdp.cpu_ram_efficient_loading) return false;
  const WrapPolicy policy = config.fsdp.auto_wrap_policy;
  if (policy == WrapPolicy::NoWrap) return true;
  if (policy == WrapPolicy::TransformerBasedWrap) {
    const std::vector<std::string> runs = model_unit_classes(config.train.model);
    const std::string& configured = config.fsdp.transformer_layer_cls_to_wrap;
    for (const std::string& cls : configured.empty() ? runs : split_list(configured))
      if (std::find(runs.begin(), runs.end(), cls) == runs.end()) {
        why_not = "class " + cls + " is not one the " + config.train.model + " model runs through units().run";
        return false;
      }
    return true;
  }
  why_not = "auto_wrap_policy = " + name_of(policy) + " may pick modules the model does not run through units().run";
  return false;
}

// A text model's vocabulary follows the data: a token file's vocabulary
// replaces [model] vocab_size when that key is left at its default (256,
// bytes); a value set on purpose must be at least the data's.
ModelSpec model_spec(const Config& config) {
  ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
  if (!builtin_model(config.train.model).generates_text) return spec;
  const int64_t data_vocab = dataset_vocab_size(config.train);
  if (config.model.vocab_size == ModelConfig{}.vocab_size && data_vocab > spec.vocab_size)
    spec.vocab_size = data_vocab;
  check_model_vocab_size(config.train, spec.vocab_size);
  return spec;
}

// The end-of-run text sample. Collective: under FSDP and ZeRO-3 each forward
// all-gathers the units' parameters, so every rank generates (the same text,
// from the same weights and sampling seed); the trainer prints and reports it.
Trainer::TextHook text_sample(std::shared_ptr<Model> model) {
  return [model](Accelerator& acc) {
    detail::set_activity("generating the end-of-run text sample");
    GenerateOptions options;
    options.n_tokens = acc.config().train.sample_tokens;
    options.seed = static_cast<uint64_t>(acc.config().distributed.seed);
    return detail::continue_text(acc, *model, "\n", options);
  };
}

}  // namespace

namespace detail {

std::shared_ptr<Model> build_builtin_model(Accelerator& acc) {
  const Config& config = acc.config();
  // Identical initialisation on every rank (prepare also broadcasts rank 0's).
  acc.set_seed(static_cast<uint64_t>(config.distributed.seed));
  ModelInit init;
  std::string why_not;
  const bool split = config.parallelism.tp_size > 1;
  if (split || config.parallelism.pp_size > 1) {
    // Every rank builds the whole model and keeps its slices or stages (docs/parallelism.md).
  } else if (deferred_init_allowed(config, why_not) && acc.world_size() > 1) {
    // Rank 0's values are streamed to the others: only rank 0 materialises them.
    init.deferred = !acc.is_main_process();
    init.device = acc.device();
  } else if (!why_not.empty()) {
    acc.print("[fsdp] cpu_ram_efficient_loading: every rank builds the full model (" + why_not + ")");
  }
  const ModelSpec spec = model_spec(config);
  std::shared_ptr<Model> model = make_model(config.train.model, spec, init);
  if (!config.model.init_from.empty()) init_from_pretrained(acc, *model, spec, config.model.init_from);
  return model;
}

// [model] init_from: rank 0 reads the pretrained weights; prepare gives every
// other rank rank 0's parameters, whatever the strategy. Under tensor
// parallelism the first data-parallel rank of each tp position reads them
// (prepare broadcasts over the data-parallel group, after the split).
void init_from_pretrained(Accelerator& acc, Model& model, const ModelSpec& spec, const std::string& path) {
  std::string why;
  if (model_family(model.kind()).hf == nullptr) {
    why = "[model] init_from reads Hugging Face weights, for [train] model = " +
          families_with([](const ModelFamily& f) { return f.hf != nullptr; }) + " only";
  } else if (acc.mesh().dp()->rank() == 0) {
    try {
      detail::load_hf_model(model.module(), model.kind(), spec, path);
    } catch (const Error& e) {
      why = e.message();
    }
  }
  all_ok(acc.comm(), why.empty(), why);
  // A notice, on stderr: stdout is the program's (generate --model's ids).
  if (acc.is_main_process()) log_info("initialised from the pretrained model " + path);
}


void seed_for_training(Accelerator& acc) {
  acc.set_seed(static_cast<uint64_t>(acc.config().distributed.seed) + 1, /*device_specific=*/true);
}

std::string continue_text(Accelerator& acc, Model& model, const std::string& prompt,
                          const GenerateOptions& options) {
  const TrainConfig& tc = acc.config().train;
  const std::string model_file = tc.data_dir + "/tokenizer.model";
  if (tc.dataset != DatasetChoice::Tokens || !std::filesystem::exists(model_file))
    return printable(generate(model, prompt, options));
  // Token files made by `mpiaccel data tokenize`: through their tokenizer.
  // A [model] vocab_size above the tokenizer's can sample ids it has no piece for.
  const Tokenizer tokenizer(model_file);
  std::vector<int64_t> ids;
  for (int64_t id : generate_tokens(model, tokenizer.encode(prompt), options))
    if (id < tokenizer.vocab_size()) ids.push_back(id);
  return printable(tokenizer.decode(ids));
}

}  // namespace detail

TrainResult train(Accelerator& acc) {
  const TrainConfig& tc = acc.config().train;
  detail::set_activity("preparing the model and data");
  const BuiltinModel kind = builtin_model(tc.model);
  detail::prepare_token_files(acc);
  std::shared_ptr<Model> model = detail::build_builtin_model(acc);
  auto train_data = make_dataset(tc, "train");
  auto val_data = make_dataset(tc, "val");
  const ParallelPlan plan = bundled_plan(*model, acc.config());
  MPIACCEL_CHECK(plan.pipeline != nullptr || acc.config().parallelism.pp_size <= 1,
                 "[parallelism] pp_size " + std::to_string(acc.config().parallelism.pp_size) + ": [train] model = " +
                     tc.model + " does not declare pipeline pieces; use " +
                     families_with([](const ModelFamily& f) { return f.pipeline_piece_tensors != nullptr; }) +
                     ", or pp_size = 1");
  const bool pipelined = acc.config().parallelism.pp_size > 1;
  // The one step that splits the model and puts it under the strategy.
  parallelize(acc, as_module(model), plan,
              [&acc](torch::nn::Module& kept) { return detail::make_optimizer(acc.config().optimizer, kept); });
  detail::seed_for_training(acc);
  // The parameters this rank holds: its tensor-parallel slices and its
  // pipeline stages (FSDP's shards count whole).
  acc.print("mpiaccel train: " + tc.model + " (" + std::to_string(parameter_count(*model)) +
            " parameters) on " + name_of(tc.dataset));

  Trainer trainer(acc, as_module(model), [m = model.get()](const at::Tensor& x) { return m->forward(x); });
  trainer.loss([m = model.get()](const at::Tensor& out, const at::Tensor& y) { return m->loss(out, y); })
      .train_data(train_data)
      .eval_data(val_data)
      .throughput_unit(kind.throughput_unit, kind.generates_text ? tc.seq_len : 1);
  if (kind.classifies) trainer.metric(accuracy_metric());
  if (kind.generates_text && tc.sample_tokens > 0 && !pipelined) trainer.text_at_end("sample", text_sample(model));
  if (kind.generates_text && tc.sample_tokens > 0 && pipelined)
    acc.print("no end-of-run sample: the model is cut into pipeline stages (generate from the checkpoint)");
  return trainer.train();
}

}  // namespace mpiaccel
