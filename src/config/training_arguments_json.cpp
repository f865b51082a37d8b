// A TrainingArguments JSON (TrainingArguments(...).to_json_string(), what
// HfArgumentParser.parse_json_file reads): about 110 fields, nearly all at the
// Trainer's defaults. A field at its default is no choice of the user's: if
// mpiaccel maps it, it is a weak setting (the Trainer's default applies unless
// another file sets the key); otherwise it passes silently. A field the user
// changed is mapped, moot, or refused by name. The defaults are transformers'
// own (training_arguments_defaults.inc, generated from the .venv's
// transformers and checked against it by a test).

#include <optional>

#include "config/translator.hpp"

namespace mpiaccel::detail {
namespace {

struct FieldDefault {
  const char* path;
  const char* json;
};

const FieldDefault kDefaults[] = {
#include "config/training_arguments_defaults.inc"
};

std::optional<nlohmann::json> default_of(const std::string& path) {
  for (const auto& field : kDefaults) {
    if (path == field.path) return nlohmann::json::parse(field.json);
  }
  return std::nullopt;
}

bool in_section(const std::string& path, const std::string& section) {
  return path.compare(0, section.size() + 1, section + ".") == 0;
}

void precision(Translator& t, const SourceLeaf& leaf, const std::string& name) {
  if (t.boolean(leaf)) return t.set(leaf, "distributed.mixed_precision", name);
  t.moot(leaf, name + " off");
}

// adam_beta1 and adam_beta2 are one mpiaccel key: each sets the pair.
void training_arguments_betas(Translator& t, const SourceLeaf& leaf) {
  const SourceLeaf* beta1 = t.find("adam_beta1");
  const SourceLeaf* beta2 = t.find("adam_beta2");
  const std::string one = beta1 ? leaf_text(t.number(*beta1)) : "0.9";
  const std::string two = beta2 ? leaf_text(t.number(*beta2)) : "0.999";
  t.set(leaf, "optimizer.betas", one + ", " + two);
}

void max_steps(Translator& t, const SourceLeaf& leaf) {
  const int64_t steps = t.integer(leaf);
  if (steps > 0) return t.set(leaf, "train.max_steps", std::to_string(steps));
  t.moot(leaf, "-1: the run length comes from the other files (mpiaccel counts steps)");
}

void epochs(Translator& t, const SourceLeaf& leaf) {
  if (t.weak()) return;  // the Trainer's default: the run length comes from elsewhere
  const SourceLeaf* steps = t.find("max_steps");
  if (steps && t.integer(*steps) > 0) return t.moot(leaf, "max_steps is given, which the Trainer prefers");
  t.refuse(leaf, "mpiaccel counts optimizer steps, not epochs; accepted: max_steps > 0 in this file");
}

void warmup_steps(Translator& t, const SourceLeaf& leaf) {
  const double steps = t.number(leaf);
  if (steps > 0 && steps < 1) t.refuse(leaf, "a warmup ratio; accepted: a number of steps (>= 1) or 0");
  t.set(leaf, "scheduler.warmup_steps", std::to_string(t.integer(leaf)));
}

// eval_strategy "steps" evaluates every eval_steps (the Trainer's default:
// logging_steps); "no" only at the end.
void eval_strategy(Translator& t, const SourceLeaf& leaf) {
  const std::string strategy = t.text(leaf);
  if (strategy == "no") return t.moot(leaf, "mpiaccel evaluates at the end of the run (train.eval_every = 0)");
  if (strategy != "steps") t.refuse(leaf, "mpiaccel counts steps, not epochs; accepted: no|steps");
  const SourceLeaf* every = t.find("eval_steps");
  if (!every || every->value.is_null()) every = t.find("logging_steps");
  if (!every) t.refuse(leaf, "steps without eval_steps or logging_steps; accepted: eval_steps > 0");
  t.set(*every, "train.eval_every", std::to_string(t.integer(*every)));
}

bool saves_every_steps(const Translator& t) {
  const SourceLeaf* strategy = t.find("save_strategy");
  return strategy == nullptr || (strategy->value.is_string() && strategy->value == "steps");
}

void save_strategy(Translator& t, const SourceLeaf& leaf) {
  const std::string strategy = t.text(leaf);
  if (strategy == "steps") return t.moot(leaf, "every save_steps");
  if (strategy != "no") t.refuse(leaf, "mpiaccel counts steps, not epochs; accepted: no|steps");
  t.set(leaf, "checkpoint.every_steps", "0");
  t.set(leaf, "checkpoint.save_at_end", "false");
}

// A setting of its own (weak at the Trainer's 500, strong when changed).
void save_steps(Translator& t, const SourceLeaf& leaf) {
  if (!saves_every_steps(t)) return t.moot(leaf, "save_strategy is not steps");
  t.set(leaf, "checkpoint.every_steps", std::to_string(t.integer(leaf)));
}

void save_total_limit(Translator& t, const SourceLeaf& leaf) {
  t.set(leaf, "checkpoint.keep_last", leaf.value.is_null() ? "0" : std::to_string(t.integer(leaf)));
}

void log_level(Translator& t, const SourceLeaf& leaf) {
  const std::string level = t.text(leaf);
  if (level == "passive") return t.moot(leaf, "passive: mpiaccel's own level (logging.level)");
  to_choice("logging.level", {{"debug", "debug"}, {"info", "info"}, {"warning", "warn"}, {"error", "error"},
                              {"critical", "error"}})(t, leaf);
}

void ddp_backend(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_null()) return t.moot(leaf, "null: distributed.backend = auto");
  to_choice("distributed.backend", {{"nccl", "nccl"}, {"mpi", "mpi"}, {"gloo", "mpi"}})(t, leaf);
}

// Rules for fields that may be null: null is moot, anything else maps.
Apply unless_null(Apply apply, std::string why) {
  return [apply, why](Translator& t, const SourceLeaf& leaf) {
    if (leaf.value.is_null()) return t.moot(leaf, why);
    apply(t, leaf);
  };
}

// The legacy options as transformers 5.17 applies them to FSDP2
// (_apply_legacy_fsdp_to_config): sharding words become reshard_after_forward,
// auto_wrap is what FSDP does anyway, FSDP1's other strategies are refused.
void fsdp_option(Translator& t, const SourceLeaf& leaf, const std::string& option) {
  if (option == "full_shard") return t.set(leaf, "fsdp.reshard_after_forward", "true");
  if (option == "shard_grad_op") return t.set(leaf, "fsdp.reshard_after_forward", "false");
  if (option == "offload") return t.set(leaf, "fsdp.cpu_offload", "true");
  if (option == "auto_wrap") return;
  t.refuse(leaf, "FSDP option '" + option + "' is FSDP1's, which transformers 5.17 refuses with FSDP2 (HSDP: an "
                 "Accelerate YAML's parallelism_config); accepted: full_shard|shard_grad_op|offload|auto_wrap");
}

// Without FSDP or DeepSpeed the Trainer runs DDP over the ranks it is given:
// a weak setting, which a DeepSpeed section or another file overrules.
void fsdp_off(Translator& t, const SourceLeaf& leaf) { t.set_default(leaf, "distributed.strategy", "ddp"); }

// fsdp: true, "full_shard auto_wrap", or a list of those words.
void fsdp(Translator& t, const SourceLeaf& leaf) {
  std::vector<std::string> options;
  if (leaf.value.is_null()) return fsdp_off(t, leaf);
  if (leaf.value.is_boolean()) {
    if (!leaf.value.get<bool>()) return fsdp_off(t, leaf);
  } else if (leaf.value.is_string()) {
    std::string words = leaf.value.get<std::string>() + " ";
    for (size_t at = 0, space; (space = words.find(' ', at)) != std::string::npos; at = space + 1) {
      if (space > at) options.push_back(words.substr(at, space - at));
    }
  } else if (leaf.value.is_array()) {
    for (const auto& item : leaf.value) options.push_back(item.is_string() ? item.get<std::string>() : item.dump());
  } else {
    t.refuse(leaf, "accepted: true, false, or FSDP options (\"full_shard auto_wrap\")");
  }
  if (leaf.value.is_string() || leaf.value.is_array()) {
    if (options.empty()) return fsdp_off(t, leaf);
  }
  t.set(leaf, "distributed.strategy", "fsdp");
  for (const auto& option : options) fsdp_option(t, leaf, option);
}

void file_or_section(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_null()) return t.moot(leaf, "none");
  t.refuse(leaf, "a path to another file; accepted: give that file as another --config (mpiaccel reads it as "
                 "it is), or the object inline");
}

std::vector<KeyRule> training_arguments_optimizer_rules() {
  return {
      {"output_dir", "mapped", "checkpoint.dir", to_text("checkpoint.dir")},
      {"per_device_train_batch_size", "mapped", "train.batch_size", to_integer("train.batch_size")},
      {"gradient_accumulation_steps", "mapped", "train.grad_accum_steps", to_integer("train.grad_accum_steps")},
      {"learning_rate", "mapped", "optimizer.lr", to_number("optimizer.lr")},
      {"weight_decay", "mapped", "optimizer.weight_decay", to_number("optimizer.weight_decay")},
      {"adam_beta1", "mapped", "optimizer.betas (with adam_beta2)", training_arguments_betas},
      {"adam_beta2", "mapped", "optimizer.betas (with adam_beta1)", training_arguments_betas},
      {"adam_epsilon", "mapped", "optimizer.eps", to_number("optimizer.eps")},
      {"max_grad_norm", "mapped", "optimizer.grad_clip", to_number("optimizer.grad_clip")},
      {"max_steps", "mapped", "> 0: train.max_steps", max_steps},
      {"num_train_epochs", "mapped", "moot when max_steps > 0; otherwise refused (mpiaccel counts steps)", epochs},
      {"lr_scheduler_type", "mapped", "scheduler.name: linear, cosine, constant, constant_with_warmup (constant)",
       to_choice("scheduler.name", {{"linear", "linear"}, {"cosine", "cosine"}, {"constant", "constant"},
                                    {"constant_with_warmup", "constant"}})},
      {"warmup_steps", "mapped", "scheduler.warmup_steps", warmup_steps},
      {"optim", "mapped", "optimizer.name: adamw_torch, adamw_torch_fused adamw; sgd sgd",
       to_choice("optimizer.name", {{"adamw_torch", "adamw"}, {"adamw_torch_fused", "adamw"}, {"sgd", "sgd"}})},
      {"bf16", "mapped", "true: distributed.mixed_precision = bf16",
       [](Translator& t, const SourceLeaf& l) { precision(t, l, "bf16"); }},
      {"fp16", "mapped", "true: distributed.mixed_precision = fp16",
       [](Translator& t, const SourceLeaf& l) { precision(t, l, "fp16"); }},
  };
}

std::vector<KeyRule> run_rules() {
  return {
      {"seed", "mapped", "distributed.seed", to_integer("distributed.seed")},
      {"logging_steps", "mapped", "train.log_every", to_integer("train.log_every")},
      {"logging_strategy", "refused", "mpiaccel logs every train.log_every steps; accepted: steps", {},
       {"\"steps\""}},
      {"eval_strategy", "mapped", "steps: train.eval_every = eval_steps (or logging_steps); no: at the end only",
       eval_strategy},
      {"eval_steps", "moot", "read with eval_strategy"},
      {"save_strategy", "mapped", "no: checkpoint.every_steps = 0, save_at_end = false; steps: see save_steps",
       save_strategy},
      {"save_steps", "mapped", "with save_strategy steps: checkpoint.every_steps", save_steps},
      {"save_total_limit", "mapped", "checkpoint.keep_last (null: 0, keep all)", save_total_limit},
      {"resume_from_checkpoint", "mapped", "checkpoint.resume",
       unless_null(to_text("checkpoint.resume"), "null: start fresh unless [checkpoint] resume says")},
      {"dataloader_drop_last", "mapped", "train.drop_last", to_flag("train.drop_last")},
      {"ddp_backend", "mapped", "distributed.backend: nccl, mpi; gloo (CPU collectives) mpi", ddp_backend},
      {"ddp_find_unused_parameters", "mapped", "ddp.find_unused_parameters",
       unless_null(to_flag("ddp.find_unused_parameters"), "null: ddp.find_unused_parameters as configured")},
      {"ddp_bucket_cap_mb", "mapped", "ddp.bucket_cap_mb",
       unless_null(to_number("ddp.bucket_cap_mb"), "null: ddp.bucket_cap_mb as configured")},
      {"ddp_static_graph", "mapped", "ddp.static_graph",
       unless_null(to_flag("ddp.static_graph"), "null: ddp.static_graph as configured")},
      {"ddp_broadcast_buffers", "moot", "every rank builds the same buffers; none change in training"},
      {"ddp_timeout", "mapped", "distributed.timeout_s", to_number("distributed.timeout_s")},
      {"gradient_checkpointing", "mapped", "fsdp.activation_checkpointing", to_flag("fsdp.activation_checkpointing")},
      {"use_cpu", "mapped", "true: distributed.device = cpu",
       [](Translator& t, const SourceLeaf& l) {
         if (t.boolean(l)) return t.set(l, "distributed.device", "cpu");
         t.moot(l, "false: a GPU when there is one");
       }},
      {"log_level", "mapped", "logging.level (warning: warn, critical: error)", log_level},
  };
}

// report_to: "all", "none", a name or a list of names; TensorBoard is
// mpiaccel's only tracker (its JSON-lines file stays).
void report_to(Translator& t, const SourceLeaf& leaf) {
  std::vector<std::string> names;
  if (leaf.value.is_string()) names.push_back(leaf.value.get<std::string>());
  else if (leaf.value.is_array())
    for (const auto& item : leaf.value) names.push_back(item.is_string() ? item.get<std::string>() : item.dump());
  else t.refuse(leaf, "accepted: \"all\", \"none\", \"tensorboard\" or a list of names");
  bool tensorboard = false;
  for (const std::string& name : names) {
    if (name == "tensorboard" || name == "all") tensorboard = true;
    else if (name != "none") t.refuse(leaf, "'" + name + "' is not a tracker mpiaccel reports to; accepted: tensorboard, all, none");
  }
  if (tensorboard) t.set(leaf, "logging.report_to", "jsonl, tensorboard");
  else t.moot(leaf, "no tracker: the metrics file ([logging] metrics_file) stays");
}

std::vector<KeyRule> distribution_rules() {
  const char* const kEval = "evaluation uses train.batch_size and train.eval_batches";
  return {
      {"fsdp", "mapped",
       "off: distributed.strategy = ddp (weak); true or options: distributed.strategy = fsdp; full_shard, "
       "shard_grad_op: fsdp.reshard_after_forward true, false; offload: fsdp.cpu_offload", fsdp},
      {"fsdp_config", "mapped", "an object: the Trainer fsdp_config rows", file_or_section},
      {"deepspeed", "mapped", "an object: the DeepSpeed rows", file_or_section},
      {"dataloader_num_workers", "mapped", "train.num_workers (threads, not processes)",
       to_integer("train.num_workers")},
      {"dataloader_prefetch_factor", "mapped", "train.prefetch_factor (null: its default, 2)",
       [](Translator& t, const SourceLeaf& l) {
         if (l.value.is_null()) return t.moot(l, "null: train.prefetch_factor keeps its default, 2");
         to_integer("train.prefetch_factor")(t, l);
       }},
      {"dataloader_persistent_workers", "moot", "the loader's worker threads live as long as the loader"},
      {"dataloader_pin_memory", "mapped", "train.pin_memory", to_flag("train.pin_memory")},
      {"accelerator_config.non_blocking", "mapped", "train.non_blocking", to_flag("train.non_blocking")},
      {"accelerator_config.split_batches", "mapped", "train.split_batches", to_flag("train.split_batches")},
      {"accelerator_config.even_batches", "refused",
       "every rank always gets the same number of batches (drop_last, or wrap-around padding as "
       "even_batches does); false would leave ranks with unequal step counts, which the step's "
       "collectives cannot survive; accepted: true",
       {}, {"true"}},
      {"accelerator_config.use_seedable_sampler", "moot", "the sampler is always seeded (distributed.seed)"},
      {"local_rank", "moot", "MPI gives each rank its number"},
      {"run_name", "moot", "the run is its metrics file and checkpoint directory"},
      {"do_train", "moot", "a flag for the user's own script"},
      {"do_eval", "moot", "a flag for the user's own script"},
      {"do_predict", "moot", "a flag for the user's own script"},
      {"per_device_eval_batch_size", "moot", kEval},
      {"disable_tqdm", "moot", "logging.progress chooses the progress display"},
      {"skip_memory_metrics", "moot", "the metrics always carry the peak memory"},
      {"report_to", "mapped", "tensorboard or all: logging.report_to = jsonl, tensorboard; other trackers refused",
       report_to},
      {"torch_compile", "refused", "LibTorch has no torch.compile; mpiaccel runs eager", {}, {"false"}},
      {"parallelism_config", "refused", "give the parallelism in an Accelerate YAML's parallelism_config", {},
       {"null"}},
  };
}

std::vector<KeyRule> training_arguments_make_rules() {
  return join_rules({training_arguments_optimizer_rules(), run_rules(), distribution_rules()});
}

}  // namespace

const std::vector<KeyRule>& training_arguments_rules() {
  static const std::vector<KeyRule> rules = training_arguments_make_rules();
  return rules;
}

Translation translate_training_arguments(const std::string& source, std::vector<SourceLeaf> leaves) {
  Translator t(source, "TrainingArguments JSON", std::move(leaves));
  const auto& rules = training_arguments_rules();
  for (const auto& leaf : t.leaves()) {
    if (in_section(leaf.path, "fsdp_config") || in_section(leaf.path, "deepspeed")) continue;
    const std::optional<nlohmann::json> standard = default_of(leaf.path);
    if (!standard && leaf.path != "output_dir") {
      t.refuse(leaf, "not a TrainingArguments field of the transformers mpiaccel knows (5.17)");
    }
    const bool at_default = standard && *standard == leaf.value;
    const KeyRule* rule = find_rule(rules, leaf.path);
    if (rule && rule->apply) {
      t.set_weak(at_default);
      apply_rule(t, rules, leaf, leaf.path);
      t.set_weak(false);
    } else if (!at_default) {
      if (!rule) t.refuse(leaf, "has no mpiaccel equivalent; accepted: the Trainer's default, " + standard->dump());
      apply_rule(t, rules, leaf, leaf.path);
    }
  }
  translate_fsdp_section(t, "fsdp_config.");
  translate_deepspeed_section(t, "deepspeed.");
  return t.result();
}

}  // namespace mpiaccel::detail
