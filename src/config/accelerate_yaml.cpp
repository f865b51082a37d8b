// Accelerate's YAML config (`accelerate config`, accelerate 1.16's
// ClusterConfig): its keys onto mpiaccel's. Accelerate copies fsdp_config's
// keys into `accelerate launch` arguments, so both spellings of an FSDP key
// (fsdp_offload_params, and the fsdp_cpu_offload of older guides) are read.

#include "config/translator.hpp"

namespace mpiaccel::detail {
namespace {

const char* const kMpiDiscovers = "MPI discovers the ranks and their addresses (mpirun or srun starts them)";
const char* const kNoCompile = "LibTorch has no torch.compile; mpiaccel runs eager";

void distributed_type(Translator& t, const SourceLeaf& leaf) {
  const std::string type = t.text(leaf);
  if (type == "NO" || type == "false") return t.set(leaf, "distributed.strategy", "no");
  if (type == "MULTI_CPU" || type == "MULTI_GPU") return t.set(leaf, "distributed.strategy", "ddp");
  if (type == "FSDP") return t.set(leaf, "distributed.strategy", "fsdp");
  if (type == "DEEPSPEED") return t.set(leaf, "distributed.strategy", "zero");
  t.refuse(leaf, "mpiaccel runs on CPUs and NVIDIA GPUs; accepted: NO|MULTI_CPU|MULTI_GPU|FSDP|DEEPSPEED");
}

// FSDP1's fsdp_reshard_after_forward held a sharding strategy; FSDP2's is a
// boolean (accelerate's to-fsdp2 conversion maps one onto the other).
void reshard_after_forward(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_boolean() || (leaf.value.is_string() && (leaf.value == "true" || leaf.value == "false"))) {
    return t.set(leaf, "fsdp.reshard_after_forward", t.boolean(leaf) ? "true" : "false");
  }
  to_choice("fsdp.sharding_strategy", {{"FULL_SHARD", "FULL_SHARD"},
                                       {"SHARD_GRAD_OP", "SHARD_GRAD_OP"},
                                       {"HYBRID_SHARD", "HYBRID_SHARD"}})(t, leaf);
}

void fsdp_version(Translator& t, const SourceLeaf& leaf) {
  if (t.integer(leaf) != 2) {
    t.refuse(leaf, "mpiaccel's FSDP is FSDP2 (per-parameter sharding, fully_shard); accepted: 2 "
                   "(the FSDP1 keys map onto it: write fsdp_version: 2)");
  }
  t.set(leaf, "fsdp.version", "2");
}

void layer_classes(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_array() || leaf.value.is_string()) {
    return t.set(leaf, "fsdp.transformer_layer_cls_to_wrap", leaf_text(leaf.value));
  }
  t.refuse(leaf, "not a class name; accepted: a name, a comma-separated list or a YAML list");
}

void accelerate_offload_device(Translator& t, const SourceLeaf& leaf, const std::string& key) {
  to_choice(key, {{"none", "none"}, {"cpu", "cpu"}})(t, leaf);
}

void gpu_ids(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_null() || (leaf.value.is_string() && leaf.value == "all")) {
    return t.moot(leaf, "every GPU of a node is used, one per rank");
  }
  t.refuse(leaf, "mpiaccel gives each rank one GPU of its node; choose GPUs with CUDA_VISIBLE_DEVICES "
                 "or Slurm's --gpus-per-node instead");
}

void compute_environment(Translator& t, const SourceLeaf& leaf) {
  if (t.text(leaf) == "LOCAL_MACHINE") return t.moot(leaf, "mpirun or srun starts the ranks on the allocation's nodes");
  t.refuse(leaf, "mpiaccel runs on the machines mpirun or srun starts it on; accepted: LOCAL_MACHINE");
}

void use_cpu(Translator& t, const SourceLeaf& leaf) {
  if (t.boolean(leaf)) return t.set(leaf, "distributed.device", "cpu");
  t.moot(leaf, "false: a GPU when there is one (distributed.device = auto)");
}

void hostfile(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_null()) return t.moot(leaf, "no hostfile");
  t.set(leaf, "launch.mpirun_args", "--hostfile " + t.text(leaf));
}

// dp_replicate × dp_shard: the mesh's data-parallel dimensions ([parallelism];
// under fsdp, replicas of shard groups are HSDP).
void dp_replicate(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_null()) return t.moot(leaf, "null: one replica");
  const int64_t replicas = t.integer(leaf);
  const SourceLeaf* shard = t.find("parallelism_config.parallelism_config_dp_shard_size");
  if (replicas > 1 && (shard == nullptr || shard->value.is_null() || t.integer(*shard) <= 1)) {
    t.refuse(leaf, "replicas without sharding are plain DDP (Accelerate refuses them too); accepted: "
                   "dp_shard_size > 1 with it (HSDP), or distributed_type: MULTI_GPU");
  }
  t.set(leaf, "parallelism.dp_replicate_size", std::to_string(replicas));
}

void dp_shard(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_null()) return t.moot(leaf, "null: the ranks the other sizes leave (auto)");
  t.set(leaf, "parallelism.dp_shard_size", std::to_string(t.integer(leaf)));
}

// tp_size: the mesh's tensor-parallel dimension (Accelerate splits a
// transformers model by its tp_plan; mpiaccel splits the bundled GPT and
// Llama the same way: heads, MLP width, vocabulary).
void tp_size(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_null()) return t.moot(leaf, "null: no tensor parallelism");
  t.set(leaf, "parallelism.tp_size", std::to_string(t.integer(leaf)));
}

// cp_size: the mesh's context-parallel dimension (the sequence split for attention).
void cp_size(Translator& t, const SourceLeaf& leaf) {
  if (leaf.value.is_null()) return t.moot(leaf, "null: no context parallelism");
  t.set(leaf, "parallelism.cp_size", std::to_string(t.integer(leaf)));
}

KeyRule refused_unless_one(const std::string& key, const std::string& feature) {
  return {key, "refused", feature + " is not in mpiaccel yet; accepted: 1", {}, {"1", "null"}};
}

std::vector<KeyRule> launch_rules() {
  return {
      {"compute_environment", "mapped", "LOCAL_MACHINE: moot (mpirun or srun starts the ranks)",
       compute_environment},
      {"distributed_type", "mapped", "distributed.strategy: NO no, MULTI_CPU/MULTI_GPU ddp, FSDP fsdp, DEEPSPEED zero",
       distributed_type},
      {"mixed_precision", "mapped", "distributed.mixed_precision (no|fp16|bf16)",
       to_choice("distributed.mixed_precision", {{"no", "no"}, {"false", "no"}, {"fp16", "fp16"}, {"bf16", "bf16"}})},
      {"use_cpu", "mapped", "true: distributed.device = cpu", use_cpu},
      {"debug", "moot", "collectives always have deadlines and name the op (docs/faults.md)"},
      {"num_processes", "mapped", "launch.num_processes", to_integer("launch.num_processes")},
      {"num_machines", "mapped", "launch.num_machines", to_integer("launch.num_machines")},
      {"machine_rank", "moot", kMpiDiscovers},
      {"main_process_ip", "moot", kMpiDiscovers},
      {"main_process_port", "moot", kMpiDiscovers},
      {"rdzv_backend", "moot", kMpiDiscovers},
      {"same_network", "moot", kMpiDiscovers},
      {"main_training_function", "moot", "mpiaccel runs a program, not a Python function"},
      {"enable_cpu_affinity", "moot", "mpirun or srun binds the ranks (launch.cpus_per_process)"},
      {"gpu_ids", "mapped", "all (or null): one GPU per rank", gpu_ids},
      {"downcast_bf16", "refused", "a TPU option", {}, {"false", "\"no\"", "null"}},
      {"tpu_name", "refused", "mpiaccel does not run on TPUs", {}, {"null"}},
      {"tpu_zone", "refused", "mpiaccel does not run on TPUs", {}, {"null"}},
      {"tpu_use_cluster", "refused", "mpiaccel does not run on TPUs", {}, {"false"}},
      {"tpu_use_sudo", "refused", "mpiaccel does not run on TPUs", {}, {"false"}},
      {"tpu_vm", "refused", "mpiaccel does not run on TPUs", {}, {"null"}},
      {"tpu_env", "refused", "mpiaccel does not run on TPUs", {}, {"null", "[]"}},
      {"command_file", "refused", "mpiaccel does not run on TPUs", {}, {"null"}},
      {"commands", "refused", "mpiaccel does not run on TPUs", {}, {"null"}},
      {"dynamo_config.*", "refused", kNoCompile, {}, {"\"NO\"", "false", "null"}},
      {"fp8_config.*", "refused", "mpiaccel has no FP8 training; accepted: mixed_precision: bf16 or fp16", {}, {"null"}},
      {"fp8_config", "refused", "mpiaccel has no FP8 training", {}, {"null", "{}"}},
      {"megatron_lm_config.*", "refused", "Megatron-LM is a Python plugin; mpiaccel's tensor and pipeline parallelism are [parallelism] tp_size, pp_size", {}, {"null"}},
      {"ipex_config.*", "refused", "Intel Extension for PyTorch is Python-only", {}, {"null", "false"}},
      {"mpirun_config.mpirun_hostfile", "mapped", "launch.mpirun_args = --hostfile FILE", hostfile},
      {"mpirun_config.mpirun_ccl", "moot", "oneCCL workers are Intel's CPU backend; mpiaccel's is MPI"},
      {"deepspeed_config", "moot", "empty: no DeepSpeed options"},
      {"fsdp_config", "moot", "empty: FSDP's defaults"},
      {"parallelism_config", "moot", "empty: data parallelism only"},
      {"dynamo_config", "moot", "empty: no torch.compile"},
      {"mpirun_config", "moot", "empty: mpirun's defaults"},
      {"megatron_lm_config", "moot", "empty: no Megatron-LM"},
  };
}

std::vector<KeyRule> fsdp_rules() {
  const std::string F = "fsdp_config.";
  return {
      // FSDP
      {F + "fsdp_version", "mapped", "fsdp.version (2 only: mpiaccel's FSDP is FSDP2)", fsdp_version},
      {F + "fsdp_reshard_after_forward", "mapped",
       "fsdp.reshard_after_forward (FSDP2 true|false); an FSDP1 strategy name: fsdp.sharding_strategy",
       reshard_after_forward},
      {F + "fsdp_sharding_strategy", "mapped", "fsdp.sharding_strategy (FULL_SHARD|SHARD_GRAD_OP|HYBRID_SHARD)",
       to_choice("fsdp.sharding_strategy",
                 {{"FULL_SHARD", "FULL_SHARD"}, {"SHARD_GRAD_OP", "SHARD_GRAD_OP"}, {"HYBRID_SHARD", "HYBRID_SHARD"},
                  {"1", "FULL_SHARD"}, {"2", "SHARD_GRAD_OP"}, {"4", "HYBRID_SHARD"}})},
      {F + "fsdp_offload_params", "mapped", "fsdp.cpu_offload", to_flag("fsdp.cpu_offload")},
      {F + "fsdp_cpu_offload", "mapped", "fsdp.cpu_offload (older spelling of fsdp_offload_params)",
       to_flag("fsdp.cpu_offload")},
      {F + "fsdp_auto_wrap_policy", "mapped", "fsdp.auto_wrap_policy",
       to_choice("fsdp.auto_wrap_policy", {{"TRANSFORMER_BASED_WRAP", "TRANSFORMER_BASED_WRAP"},
                                           {"SIZE_BASED_WRAP", "SIZE_BASED_WRAP"},
                                           {"NO_WRAP", "NO_WRAP"}})},
      {F + "fsdp_transformer_layer_cls_to_wrap", "mapped", "fsdp.transformer_layer_cls_to_wrap", layer_classes},
      {F + "fsdp_min_num_params", "mapped", "fsdp.min_num_params", to_integer("fsdp.min_num_params")},
      {F + "fsdp_cpu_ram_efficient_loading", "mapped", "fsdp.cpu_ram_efficient_loading",
       to_flag("fsdp.cpu_ram_efficient_loading")},
      {F + "fsdp_activation_checkpointing", "mapped", "fsdp.activation_checkpointing",
       to_flag("fsdp.activation_checkpointing")},
      {F + "fsdp_state_dict_type", "mapped", "fsdp.state_dict_type (SHARDED_STATE_DICT|FULL_STATE_DICT)",
       to_choice("fsdp.state_dict_type",
                 {{"SHARDED_STATE_DICT", "SHARDED_STATE_DICT"}, {"FULL_STATE_DICT", "FULL_STATE_DICT"}})},
      {F + "fsdp_forward_prefetch", "mapped", "fsdp.forward_prefetch", to_flag("fsdp.forward_prefetch")},
      {F + "fsdp_backward_prefetch", "mapped", "fsdp.backward_prefetch",
       to_choice("fsdp.backward_prefetch", {{"BACKWARD_PRE", "BACKWARD_PRE"}, {"BACKWARD_POST", "BACKWARD_POST"},
                                            {"NO_PREFETCH", "NO_PREFETCH"}})},
      {F + "fsdp_use_orig_params", "refused",
       "FSDP2 always trains the original parameters; false is an FSDP1 flat-parameter mode", {}, {"true"}},
      {F + "fsdp_sync_module_states", "moot",
       "every rank builds the same initial weights from the seed (or rank 0's with cpu_ram_efficient_loading)"},
      {F + "fsdp_activation_checkpointing_offload", "refused", "activations are recomputed, not offloaded", {},
       {"false"}},
  };
}

std::vector<KeyRule> deepspeed_rules() {
  const std::string D = "deepspeed_config.";
  return {
      // DeepSpeed, as `accelerate config` asks for it
      {D + "zero_stage", "mapped", "zero.stage", to_integer("zero.stage")},
      {D + "offload_optimizer_device", "mapped", "zero.offload_optimizer (none|cpu)",
       [](Translator& t, const SourceLeaf& l) { accelerate_offload_device(t, l, "zero.offload_optimizer"); }},
      {D + "offload_param_device", "mapped", "zero.offload_param (none|cpu)",
       [](Translator& t, const SourceLeaf& l) { accelerate_offload_device(t, l, "zero.offload_param"); }},
      {D + "offload_optimizer_nvme_path", "refused", "no NVMe offload; accepted: offload to cpu", {},
       {"null", "\"none\""}},
      {D + "offload_param_nvme_path", "refused", "no NVMe offload; accepted: offload to cpu", {}, {"null", "\"none\""}},
      {D + "gradient_accumulation_steps", "mapped", "train.grad_accum_steps", to_integer("train.grad_accum_steps")},
      {D + "gradient_clipping", "mapped", "optimizer.grad_clip", to_number("optimizer.grad_clip")},
      {D + "zero3_init_flag", "moot", "ZeRO-3 models are built sharded"},
      {D + "zero3_save_16bit_model", "moot",
       "checkpoints are sharded fp32; `mpiaccel ckpt export` writes a whole model"},
      {D + "deepspeed_multinode_launcher", "moot", "mpirun or srun launches every node"},
      {D + "deepspeed_hostfile", "moot", "mpirun's hostfile or the Slurm allocation gives the nodes"},
      {D + "deepspeed_inclusion_filter", "moot", "mpirun's hostfile or the Slurm allocation gives the nodes"},
      {D + "deepspeed_exclusion_filter", "moot", "mpirun's hostfile or the Slurm allocation gives the nodes"},
      {D + "deepspeed_config_file", "refused",
       "give the DeepSpeed JSON itself as another --config (mpiaccel reads it as it is)", {}, {"null"}},
      {D + "deepspeed_moe_layer_cls_names", "refused", "mpiaccel has no mixture-of-experts layers", {}, {"null"}},
  };
}

std::vector<KeyRule> parallelism_rules() {
  const std::string P = "parallelism_config.parallelism_config_";
  return {
      // ParallelismConfig (accelerate >= 1.10)
      {P + "dp_replicate_size", "mapped", "parallelism.dp_replicate_size (> 1 needs dp_shard_size > 1)",
       dp_replicate},
      {P + "dp_shard_size", "mapped", "parallelism.dp_shard_size", dp_shard},
      {P + "tp_size", "mapped", "parallelism.tp_size", tp_size},
      {P + "cp_size", "mapped", "parallelism.cp_size", cp_size},
      refused_unless_one(P + "sp_size", "sequence parallelism"),
      {P + "cp_backend", "moot", "torch: mpiaccel's context parallelism is its own, over MPI or NCCL"},
      // PyTorch's two ways to move ring attention's key/value blocks (all at
      // once, or block by block): both are ring attention, mpiaccel's "ring".
      {P + "cp_comm_strategy", "mapped", "parallelism.cp_comm_strategy = ring (allgather and alltoall are "
       "PyTorch's ways to pass ring attention's key/value blocks)",
       to_choice("parallelism.cp_comm_strategy", {{"allgather", "ring"}, {"alltoall", "ring"}})},
      {P + "sp_backend", "moot", "no sequence parallelism (sp_size 1)"},
      {P + "sp_seq_length", "moot", "no sequence parallelism (sp_size 1)"},
      {P + "sp_seq_length_is_variable", "moot", "no sequence parallelism (sp_size 1)"},
      {P + "sp_attn_implementation", "moot", "no sequence parallelism (sp_size 1)"},
  };
}

std::vector<KeyRule> accelerate_make_rules() {
  return join_rules({launch_rules(), fsdp_rules(), deepspeed_rules(), parallelism_rules()});
}

}  // namespace

const std::vector<KeyRule>& accelerate_yaml_rules() {
  static const std::vector<KeyRule> rules = accelerate_make_rules();
  return rules;
}

Translation translate_accelerate_yaml(const std::string& source, std::vector<SourceLeaf> leaves) {
  Translator translator(source, "Accelerate YAML", std::move(leaves));
  apply_rules(translator, accelerate_yaml_rules());
  return translator.result();
}

}  // namespace mpiaccel::detail
