// DeepSpeed's JSON config (docs: deepspeed.ai/docs/config-json): its keys onto
// mpiaccel's. "auto" (the Trainer's convention) leaves a key to the other
// files or mpiaccel's default. Bucket sizes are element counts in DeepSpeed;
// mpiaccel's are MiB of fp32 gradients (4 bytes an element).

#include <cmath>

#include "config/translator.hpp"

namespace mpiaccel::detail {
namespace {

const char* const kScaler =
    "mpiaccel's loss scaler is torch.amp.GradScaler's: start 2^16, halve on overflow, double after 2000 "
    "finite steps";
const char* const kNoNvme = "no NVMe offload; accepted: cpu or none";

// "scheduler.type" → "scheduler.": the leaf's own prefix
// (the rules also run on a TrainingArguments file's "deepspeed." section).
std::string prefix_of(const SourceLeaf& leaf, const std::string& own_path) {
  return leaf.path.substr(0, leaf.path.size() - own_path.size());
}

void train_batch_size(Translator& t, const SourceLeaf& leaf) {
  t.result().train_batch_size = t.integer(leaf);
  t.result().train_batch_size_origin = t.origin(leaf);
  if (t.result().train_batch_size < 1) t.refuse(leaf, "not a batch size; accepted: >= 1 or \"auto\"");
}

void zero_stage(Translator& t, const SourceLeaf& leaf) {
  const int64_t stage = t.integer(leaf);
  if (stage < 0 || stage > 3) t.refuse(leaf, "not a ZeRO stage; accepted: 0..3");
  t.set(leaf, "distributed.strategy", "zero");
  t.set(leaf, "zero.stage", std::to_string(stage));
}

void precision_enabled(Translator& t, const SourceLeaf& leaf, const std::string& precision) {
  if (t.boolean(leaf)) return t.set(leaf, "distributed.mixed_precision", precision);
  t.moot(leaf, precision + " off");
}

void deepspeed_offload_device(Translator& t, const SourceLeaf& leaf, const std::string& key) {
  if (leaf.value.is_null()) return t.moot(leaf, "no offload");
  to_choice(key, {{"none", "none"}, {"cpu", "cpu"}})(t, leaf);
}

// Elements of fp32 gradients → MiB.
Apply to_bucket_mib(const std::string& key) {
  return [key](Translator& t, const SourceLeaf& leaf) {
    const double elements = t.number(leaf);
    if (!(elements >= 1) || !std::isfinite(elements)) t.refuse(leaf, "not a bucket size; accepted: elements >= 1");
    t.set(leaf, key, leaf_text(elements * 4.0 / (1024.0 * 1024.0)));
  };
}

void optimizer_type(Translator& t, const SourceLeaf& leaf) {
  const std::string type = t.text(leaf);
  const std::string params = prefix_of(leaf, "type") + "params.";
  if (type == "AdamW" || type == "Adam") {
    // DeepSpeed's "Adam" is AdamW unless adam_w_mode is false (then the decay is L2).
    const SourceLeaf* mode = t.find(params + "adam_w_mode");
    const SourceLeaf* decay = t.find(params + "weight_decay");
    if (type == "Adam" && mode && !t.boolean(*mode) && decay && !Translator::is_auto(*decay) && t.number(*decay) != 0) {
      t.refuse(*mode, "Adam with L2 weight decay is not mpiaccel's AdamW; accepted: adam_w_mode true");
    }
    return t.set(leaf, "optimizer.name", "adamw");
  }
  if (type == "SGD") return t.set(leaf, "optimizer.name", "sgd");
  t.refuse(leaf, "mpiaccel's optimizers are AdamW and SGD; accepted: AdamW|Adam|SGD");
}

void deepspeed_betas(Translator& t, const SourceLeaf& leaf) {
  if (!leaf.value.is_array() || leaf.value.size() != 2 || !leaf.value[0].is_number() || !leaf.value[1].is_number()) {
    t.refuse(leaf, "not two numbers; accepted: [beta1, beta2]");
  }
  t.set(leaf, "optimizer.betas", leaf_text(leaf.value[0]) + ", " + leaf_text(leaf.value[1]));
}

// WarmupLR, WarmupDecayLR and WarmupCosineLR onto mpiaccel's schedules
// (transformers' formulas: linear warmup from 0, then constant, linear or
// cosine to min_lr_ratio × lr at max_steps). DeepSpeed's defaults count: without
// warmup_num_steps it warms up for 1000 steps; without warmup_type "linear",
// logarithmically; WarmupLR's and WarmupDecayLR's peak is warmup_max_lr
// (default 0.001), not the optimizer's lr.
void scheduler_type(Translator& t, const SourceLeaf& leaf) {
  const std::string type = t.text(leaf);
  if (type != "WarmupLR" && type != "WarmupDecayLR" && type != "WarmupCosineLR") {
    t.refuse(leaf, "not a schedule mpiaccel has; accepted: WarmupLR|WarmupDecayLR|WarmupCosineLR");
  }
  const std::string params = prefix_of(leaf, "type") + "params.";
  const SourceLeaf* warmup = t.find(params + "warmup_num_steps");
  if (warmup == nullptr) {
    t.refuse(leaf, "without warmup_num_steps DeepSpeed warms up for 1000 steps, logarithmically; accepted: "
                   "\"warmup_num_steps\": N (0: none) and \"warmup_type\": \"linear\"");
  }
  const SourceLeaf* shape = t.find(params + "warmup_type");
  const bool linear = shape && shape->value.is_string() && shape->value == "linear";
  if (!linear && Translator::is_auto(*warmup)) {
    t.result().log_warmup_origin = t.origin(*warmup);  // refused once the warmup is known to be > 0
  } else if (!linear && t.number(*warmup) > 0) {
    t.refuse(shape ? *shape : *warmup, "DeepSpeed warms up logarithmically unless warmup_type is linear; "
                                       "mpiaccel warms up linearly; accepted: \"warmup_type\": \"linear\"");
  }
  if (type == "WarmupDecayLR" && !t.find(params + "total_num_steps")) {
    t.refuse(leaf, "WarmupDecayLR decays over total_num_steps; accepted: \"total_num_steps\": the run's steps");
  }
  if (type != "WarmupCosineLR" && !t.find(params + "warmup_max_lr")) t.set(leaf, "optimizer.lr", "0.001");
  t.set(leaf, "scheduler.name", type == "WarmupLR" ? "constant" : type == "WarmupDecayLR" ? "linear" : "cosine");
}

void warmup_min_lr(Translator& t, const SourceLeaf& leaf) {
  if (t.number(leaf) != 0) t.refuse(leaf, "mpiaccel's warmup starts from 0; accepted: 0");
  t.moot(leaf, "warmup starts from 0");
}

// A feature DeepSpeed switches on with NAME.enabled: refused when enabled,
// and its other keys moot while it is off.
std::vector<KeyRule> feature(const std::string& name, const std::string& why, const std::string& off) {
  return {{name + ".enabled", "refused", why, {}, {"false"}}, {name + ".*", "moot", off}};
}

KeyRule off_unless(const std::string& key, const std::string& why, std::vector<std::string> harmless) {
  return {key, "refused", why, {}, std::move(harmless)};
}

std::vector<KeyRule> batch_rules() {
  return {
      {"train_batch_size", "mapped", "checked at start-up: = train.batch_size × grad_accum_steps × ranks",
       train_batch_size},
      {"train_micro_batch_size_per_gpu", "mapped", "train.batch_size", to_integer("train.batch_size")},
      {"gradient_accumulation_steps", "mapped", "train.grad_accum_steps", to_integer("train.grad_accum_steps")},
      {"gradient_clipping", "mapped", "optimizer.grad_clip", to_number("optimizer.grad_clip")},
      {"steps_per_print", "moot", "DeepSpeed's own progress line; mpiaccel logs every train.log_every steps"},
      {"communication_data_type", "mapped", "distributed.reduce_dtype (fp32|fp16|bf16)",
       to_choice("distributed.reduce_dtype", {{"fp32", "fp32"}, {"fp16", "fp16"}, {"bf16", "bf16"}})},
      {"wall_clock_breakdown", "moot", "[logging] trace records where the time goes"},
      {"memory_breakdown", "moot", "`mpiaccel estimate-memory` and the metrics' peak memory"},
      {"dump_state", "moot", "`mpiaccel config --from` prints the resolved config"},
      {"zero_allow_untested_optimizer", "moot", "mpiaccel's optimizers all work with ZeRO"},
      {"zero_force_ds_cpu_optimizer", "moot", "ZeRO-Offload steps with mpiaccel's own CPU AdamW"},
      off_unless("prescale_gradients", "gradients are averaged once, after the reduction", {"false"}),
      off_unless("gradient_predivide_factor", "gradients are averaged once, after the reduction", {"1", "1.0"}),
      off_unless("sparse_gradients", "no sparse gradients", {"false"}),
      {"seq_parallel_communication_data_type", "moot", "no sequence parallelism"},
  };
}

std::vector<KeyRule> precision_rules() {
  return {
      {"fp16.enabled", "mapped", "true: distributed.mixed_precision = fp16",
       [](Translator& t, const SourceLeaf& l) { precision_enabled(t, l, "fp16"); }},
      off_unless("fp16.loss_scale", "static loss scaling; accepted: 0 (dynamic)", {"0", "0.0"}),
      off_unless("fp16.initial_scale_power", std::string(kScaler) + "; accepted: 16", {"16"}),
      {"fp16.loss_scale_window", "moot", kScaler},
      {"fp16.hysteresis", "moot", kScaler},
      {"fp16.consecutive_hysteresis", "moot", kScaler},
      {"fp16.min_loss_scale", "moot", kScaler},
      off_unless("fp16.auto_cast", "the model's inputs are not cast", {"false"}),
      off_unless("fp16.fp16_master_weights_and_grads", "master weights stay fp32", {"false"}),
      {"bf16.enabled", "mapped", "true: distributed.mixed_precision = bf16",
       [](Translator& t, const SourceLeaf& l) { precision_enabled(t, l, "bf16"); }},
      {"bf16.immediate_grad_update", "moot", "gradients are reduced in the dtype of distributed.reduce_dtype"},
      {"bf16.check_grad_overflow", "moot", "bf16 needs no overflow check"},
      off_unless("amp.*", "NVIDIA Apex AMP; accepted: fp16 or bf16 instead", {"false", "null"}),
      {"data_types.grad_accum_dtype", "refused", "gradients accumulate in fp32; accepted: fp32", {},
       {"\"fp32\"", "null"}},
  };
}

std::vector<KeyRule> deepspeed_optimizer_rules() {
  const std::string O = "optimizer.params.", S = "scheduler.params.";
  return {
      {"optimizer.type", "mapped", "optimizer.name: AdamW or Adam (adam_w_mode) adamw, SGD sgd", optimizer_type},
      {O + "lr", "mapped", "optimizer.lr", to_number("optimizer.lr")},
      {O + "betas", "mapped", "optimizer.betas", deepspeed_betas},
      {O + "eps", "mapped", "optimizer.eps", to_number("optimizer.eps")},
      {O + "weight_decay", "mapped", "optimizer.weight_decay", to_number("optimizer.weight_decay")},
      {O + "momentum", "mapped", "optimizer.momentum", to_number("optimizer.momentum")},
      {O + "adam_w_mode", "moot", "checked with optimizer.type"},
      {O + "torch_adam", "moot", "mpiaccel's AdamW picks its own kernel (docs/ddp.md)"},
      off_unless(O + "bias_correction", "AdamW always corrects its bias", {"true"}),
      off_unless(O + "amsgrad", "no AMSGrad", {"false"}),
      off_unless(O + "nesterov", "no Nesterov momentum", {"false"}),
      off_unless(O + "dampening", "no SGD dampening", {"0", "0.0"}),
      {"scheduler.type", "mapped",
       "scheduler.name: WarmupLR constant, WarmupDecayLR linear, WarmupCosineLR cosine; without warmup_max_lr, "
       "optimizer.lr = 0.001 (DeepSpeed's default peak); warmup_num_steps is required, and warmup_type linear "
       "unless the warmup is 0",
       scheduler_type},
      {S + "warmup_num_steps", "mapped", "scheduler.warmup_steps", to_integer("scheduler.warmup_steps")},
      {S + "warmup_max_lr", "mapped", "optimizer.lr", to_number("optimizer.lr")},
      {S + "warmup_min_lr", "mapped", "0 only: warmup starts from 0", warmup_min_lr},
      {S + "warmup_type", "moot", "checked with scheduler.type (linear only)"},
      {S + "total_num_steps", "mapped", "train.max_steps", to_integer("train.max_steps")},
      {S + "cos_min_ratio", "mapped", "scheduler.min_lr_ratio", to_number("scheduler.min_lr_ratio")},
      off_unless(S + "warmup_min_ratio", "warmup starts from 0", {"0", "0.0"}),
      {S + "last_batch_iteration", "moot", "resuming restores the step from the checkpoint"},
  };
}

std::vector<KeyRule> zero_rules() {
  const std::string Z = "zero_optimization.";
  const std::string OO = Z + "offload_optimizer.", OP = Z + "offload_param.";
  return {
      {Z + "stage", "mapped", "distributed.strategy = zero, zero.stage", zero_stage},
      {OO + "device", "mapped", "zero.offload_optimizer (none|cpu)",
       [](Translator& t, const SourceLeaf& l) { deepspeed_offload_device(t, l, "zero.offload_optimizer"); }},
      {OP + "device", "mapped", "zero.offload_param (none|cpu)",
       [](Translator& t, const SourceLeaf& l) { deepspeed_offload_device(t, l, "zero.offload_param"); }},
      {Z + "cpu_offload", "mapped", "true: zero.offload_optimizer = cpu (the old spelling)",
       [](Translator& t, const SourceLeaf& l) { t.set(l, "zero.offload_optimizer", t.boolean(l) ? "cpu" : "none"); }},
      {OO + "pin_memory", "moot", "offloaded state lives in ordinary host memory on CPU machines"},
      {OP + "pin_memory", "moot", "offloaded state lives in ordinary host memory on CPU machines"},
      {OO + "buffer_count", "moot", kNoNvme},
      {OP + "buffer_count", "moot", kNoNvme},
      {OP + "buffer_size", "moot", kNoNvme},
      {OP + "max_in_cpu", "moot", kNoNvme},
      {OO + "fast_init", "moot", kNoNvme},
      off_unless(OO + "nvme_path", kNoNvme, {"null", "\"none\""}),
      off_unless(OP + "nvme_path", kNoNvme, {"null", "\"none\""}),
      off_unless(OO + "ratio", "the whole optimizer step is offloaded; accepted: 1", {"1", "1.0"}),
      {Z + "reduce_bucket_size", "mapped", "zero.reduce_bucket_mb = elements × 4 B",
       to_bucket_mib("zero.reduce_bucket_mb")},
      {Z + "allgather_bucket_size", "mapped", "zero.allgather_bucket_mb = elements × 4 B",
       to_bucket_mib("zero.allgather_bucket_mb")},
      {Z + "overlap_comm", "moot", "ZeRO always overlaps the reduction with backward"},
      {Z + "contiguous_gradients", "moot", "gradients are always copied into contiguous buckets"},
      {Z + "reduce_scatter", "moot", "ZeRO-2/3 reduce-scatter; ZeRO-1 all-reduces"},
      {Z + "allgather_partitions", "moot", "parameters are all-gathered in buckets after the step"},
      {Z + "round_robin_gradients", "moot", "buckets are assigned by rank order"},
      {Z + "elastic_checkpoint", "moot", "every checkpoint loads at any world size (docs/checkpoint.md)"},
      {Z + "load_from_fp32_weights", "moot", "checkpoints keep fp32 master weights"},
      {Z + "ignore_unused_parameters", "moot", "unused parameters get zero gradients"},
      {Z + "legacy_stage1", "moot", "one ZeRO-1"},
      {Z + "memory_efficient_linear", "moot", "LibTorch's linear"},
      {Z + "use_multi_rank_bucket_allreduce", "moot", "one bucketed reduction"},
      {Z + "sub_group_size", "moot", "the optimizer steps each rank's shard at once"},
      {Z + "stage3_prefetch_bucket_size", "moot", "ZeRO-3 prefetches the next FSDP unit (fsdp.forward_prefetch)"},
      {Z + "stage3_param_persistence_threshold", "moot", "every parameter of a unit is sharded"},
      {Z + "model_persistence_threshold", "moot", "every parameter of a unit is sharded"},
      {Z + "stage3_max_live_parameters", "moot", "at most two units are gathered at once"},
      {Z + "stage3_max_reuse_distance", "moot", "at most two units are gathered at once"},
      {Z + "stage3_gather_16bit_weights_on_model_save", "moot",
       "checkpoints are sharded fp32; `mpiaccel ckpt export` writes a whole model"},
      {Z + "stage3_gather_fp16_weights_on_model_save", "moot",
       "checkpoints are sharded fp32; `mpiaccel ckpt export` writes a whole model"},
      {Z + "zero_hpz_partition_size", "mapped",
       "zero.secondary_partition_size (ZeRO++ hpZ: a second shard in each group for backward's gathers)",
       to_integer("zero.secondary_partition_size")},
      {Z + "zero_quantized_weights", "mapped", "zero.quantized_weights (ZeRO++ qwZ: int8 parameter all-gathers)",
       to_flag("zero.quantized_weights")},
      {Z + "zero_quantized_gradients", "mapped", "zero.quantized_gradients (ZeRO++ qgZ: int8 gradient reduce-scatter)",
       to_flag("zero.quantized_gradients")},
      off_unless(Z + "zero_quantized_nontrainable_weights",
                 "mpiaccel quantizes the gathers of trainable parameters only (zero_quantized_weights)", {"false"}),
      off_unless(Z + "mics_shard_size", "MiCS is not in mpiaccel; HSDP is fsdp.sharding_strategy = HYBRID_SHARD",
                 {"-1"}),
      off_unless(Z + "mics_hierarchical_params_gather", "MiCS is not in mpiaccel", {"false"}),
  };
}

// DeepSpeed's TensorBoard monitor writes into output_path/job_name.
std::vector<KeyRule> tensorboard_rules() {
  return {
      {"tensorboard.enabled", "mapped", "true: logging.report_to = jsonl, tensorboard",
       [](Translator& t, const SourceLeaf& l) {
         if (t.boolean(l)) t.set(l, "logging.report_to", "jsonl, tensorboard");
         else t.moot(l, "TensorBoard off");
       }},
      {"tensorboard.output_path", "mapped", "logging.logging_dir, with job_name below it",
       [](Translator& t, const SourceLeaf& l) {
         const SourceLeaf* job = t.find("tensorboard.job_name");
         const std::string dir = t.text(l);
         t.set(l, "logging.logging_dir", job ? (dir.empty() || dir.back() == '/' ? dir : dir + "/") + t.text(*job) : dir);
       }},
      {"tensorboard.job_name", "mapped", "the last directory of logging.logging_dir (runs/JOB without output_path)",
       [](Translator& t, const SourceLeaf& l) {
         if (t.find("tensorboard.output_path")) t.moot(l, "joined to output_path in logging.logging_dir");
         else t.set(l, "logging.logging_dir", "runs/" + t.text(l));
       }},
  };
}

std::vector<KeyRule> feature_rules() {
  const std::vector<KeyRule> sections{
      {"activation_checkpointing.*", "moot",
       "configures deepspeed.checkpointing, which only models calling it use; mpiaccel's is fsdp.activation_checkpointing"},
      {"checkpoint.*", "moot", "checkpoints are one parallel HDF5 file (docs/checkpoint.md)"},
      {"aio.*", "moot", kNoNvme},
      off_unless("pipeline.*", "DeepSpeed's pipeline engine is built in Python (PipelineModule); mpiaccel's is [parallelism] pp_size", {"null"}),
      off_unless("compression_training.*", "no compression training", {"null"}),
      off_unless("sparse_attention.*", "no sparse attention", {"null"}),
  };
  const std::string metrics = "metrics go to [logging] metrics_file";
  return join_rules({
      sections,
      feature("flops_profiler", "no FLOPs profiler; [logging] trace times the step", "no FLOPs profiler"),
      feature("comms_logger", "no communication logger; [logging] trace records collectives",
              "no communication logger"),
      tensorboard_rules(),
      feature("wandb", "no Weights & Biases; " + metrics, "W&B off"),
      feature("csv_monitor", metrics + " (JSON lines)", "CSV monitor off"),
      feature("elasticity", "no elastic batch sizes; the world size is fixed at launch", "elasticity off"),
      feature("data_efficiency", "no curriculum or data routing", "data efficiency off"),
      feature("curriculum_learning", "no curriculum learning", "curriculum learning off"),
      feature("autotuning", "no autotuning", "autotuning off"),
      feature("hybrid_engine", "no hybrid engine", "hybrid engine off"),
      feature("nebula", "no Nebula checkpoints", "Nebula off"),
  });
}

std::vector<KeyRule> deepspeed_make_rules() {
  return join_rules({batch_rules(), precision_rules(), deepspeed_optimizer_rules(), zero_rules(), feature_rules()});
}

}  // namespace

const std::vector<KeyRule>& deepspeed_json_rules() {
  static const std::vector<KeyRule> rules = deepspeed_make_rules();
  return rules;
}

void translate_deepspeed_section(Translator& translator, const std::string& prefix) {
  const auto& rules = deepspeed_json_rules();
  for (const auto& leaf : translator.leaves()) {
    if (leaf.path.compare(0, prefix.size(), prefix) != 0) continue;
    apply_rule(translator, rules, leaf, leaf.path.substr(prefix.size()));
  }
}

Translation translate_deepspeed_json(const std::string& source, std::vector<SourceLeaf> leaves) {
  Translator translator(source, "DeepSpeed JSON", std::move(leaves));
  apply_rules(translator, deepspeed_json_rules());
  return translator.result();
}

}  // namespace mpiaccel::detail
