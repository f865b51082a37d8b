// The schema table: every section and key of the INI file, in file order.
// Names and defaults follow Hugging Face Accelerate's config where it has the
// key (docs/config.md); defaults are the member initialisers of config.hpp.

#include "config/schema.hpp"

#include "config/key_spec_builder.hpp"
#include "config/value_text.hpp"
#include "model_family_names.hpp"

namespace mpiaccel {

std::string default_model_family() { return MPIACCEL_DEFAULT_MODEL_FAMILY; }

namespace detail {
namespace {

// The key is the member's own name, so a struct field and its key cannot drift.
#define MPIACCEL_KEY(Struct, member) #member, &Struct::member
// A family's folder name as the accepted value of [train] model.
#define MPIACCEL_FAMILY_NAME(family) #family,

// ZeRO++'s three switches: the same keys in [fsdp] and in [zero] (stage 3).
template <class S>
void add_zero_plus_plus(SectionRows<S>& section) {
  section
      .flag(MPIACCEL_KEY(S, quantized_weights),
            "ZeRO++ qwZ (FSDP, ZeRO-3): all-gather parameters in int8 with a scale per 256 values (a quarter of "
            "fp32's bytes)")
      .integer(MPIACCEL_KEY(S, secondary_partition_size), at_least(0),
               "ZeRO++ hpZ (FSDP, ZeRO-3): groups of this many ranks keep a second shard for backward's gathers; "
               "1 = off, 0 = one node's ranks")
      .flag(MPIACCEL_KEY(S, quantized_gradients),
            "ZeRO++ qgZ (FSDP, ZeRO-3): reduce-scatter gradients in int8 with a scale per 256 values, by "
            "all-to-all");
}

std::vector<KeySpec> build_schema() {
  std::vector<KeySpec> rows;

  using L = LaunchConfig;
  rows_of(rows, "launch", &Config::launch)
      .integer(MPIACCEL_KEY(L, num_machines), at_least(1), "number of nodes")
      .integer(MPIACCEL_KEY(L, num_processes), at_least(1), "total number of ranks (all nodes)")
      .choice(MPIACCEL_KEY(L, launcher),
              "launcher; auto = srun inside a Slurm allocation, else mpirun")
      .integer(MPIACCEL_KEY(L, cpus_per_process), at_least(0),
               "cores bound to each rank; 0 = cores of the node / ranks per node")
      .text(MPIACCEL_KEY(L, mpirun_args), true, "any text", "extra arguments for mpirun")
      .text(MPIACCEL_KEY(L, srun_args), true, "any text", "extra arguments for srun");

  using D = DistributedConfig;
  rows_of(rows, "distributed", &Config::distributed)
      .choice(MPIACCEL_KEY(D, strategy),
              "how parameters, gradients and optimizer state are distributed")
      .choice(MPIACCEL_KEY(D, backend),
              "communicator; auto = nccl when every rank has a GPU of its own and NCCL is built, "
              "else mpi (staged through the host on GPUs)")
      .choice(MPIACCEL_KEY(D, mixed_precision),
              "compute dtype of forward/backward; fp16 adds dynamic loss scaling")
      .choice(MPIACCEL_KEY(D, param_dtype),
              "dtype of unsharded parameters; auto = from mixed_precision")
      .choice(MPIACCEL_KEY(D, reduce_dtype),
              "dtype of gradient reductions; auto = from mixed_precision")
      .choice(MPIACCEL_KEY(D, buffer_dtype),
              "dtype of module buffers; auto = from mixed_precision")
      .real(MPIACCEL_KEY(D, timeout_s), positive(),
            "seconds a collective may take before the job is aborted")
      .integer(MPIACCEL_KEY(D, seed), at_least(0), "seed of model init, data order and dropout")
      .choice(MPIACCEL_KEY(D, device),
              "device of each rank; auto = the local rank's GPU if any, else cpu")
      .flag(MPIACCEL_KEY(D, allow_gpu_sharing), "allow several ranks on one GPU (never with nccl)");

  using Mp = ParallelismConfig;
  rows_of(rows, "parallelism", &Config::parallelism)
      .size_or_auto(MPIACCEL_KEY(Mp, dp_replicate_size),
                    "data-parallel replicas (fsdp: HSDP's replica groups); auto = the world size / (dp_shard_size × tp_size)")
      .size_or_auto(MPIACCEL_KEY(Mp, dp_shard_size),
                    "ranks of each data-parallel group that shards (fsdp, zero); auto = the world size / "
                    "(dp_replicate_size × tp_size)")
      .integer(MPIACCEL_KEY(Mp, tp_size), at_least(1),
               "tensor-parallel ranks: attention split by heads, the MLP by width, the vocabulary by rows")
      .flag(MPIACCEL_KEY(Mp, tp_across_nodes),
            "allow a tensor-parallel group to span nodes (refused otherwise: its all-reduces are per layer)")
      .flag(MPIACCEL_KEY(Mp, sequence_parallel),
            "with tp_size > 1: norms and dropout on sequence shards, all-gather/reduce-scatter for all-reduce")
      .integer(MPIACCEL_KEY(Mp, pp_size), at_least(1),
               "pipeline stages: the model cut into consecutive layers, microbatches passed between ranks")
      .choice(MPIACCEL_KEY(Mp, pp_schedule),
              "the order of each stage's forwards and backwards (zb_h1: weight gradients fill the bubble)")
      .integer(MPIACCEL_KEY(Mp, pp_virtual_stages), at_least(0),
               "stages per rank (interleaved_1f1b: 2 or more); 0 = 2 for interleaved_1f1b, else 1")
      .integer(MPIACCEL_KEY(Mp, pp_microbatches), at_least(0),
               "microbatches per optimizer step, cut from the step's batches; 0 = [train] grad_accum_steps")
      .text(MPIACCEL_KEY(Mp, pp_layers), true, "first-last layer of each stage, e.g. 0-3,4-7",
            "each stage's layers; empty = balanced by parameter count")
      .integer(MPIACCEL_KEY(Mp, cp_size), at_least(1),
               "context-parallel ranks: each sample's sequence split over them, attention exchanging keys and "
               "values (seq_len a multiple of 2 x cp_size)")
      .choice(MPIACCEL_KEY(Mp, cp_comm_strategy),
              "ring: key/value blocks passed around the cp ranks; alltoall: sequence shards swapped for head "
              "shards (Ulysses; n_head a multiple of cp_size x tp_size)");

  using P = DdpConfig;
  rows_of(rows, "ddp", &Config::ddp)
      .real(MPIACCEL_KEY(P, bucket_cap_mb), positive(), "gradient bucket size in MiB")
      .flag(MPIACCEL_KEY(P, find_unused_parameters),
            "find parameters without a gradient each step (slower)")
      .flag(MPIACCEL_KEY(P, gradient_as_bucket_view),
            "gradients are views into the buckets (saves one copy and memory)")
      .flag(MPIACCEL_KEY(P, static_graph), "the set of used parameters never changes")
      .flag(MPIACCEL_KEY(P, node_shared_params),
            "CPU ranks of one node share one copy of the parameters; each updates its rows")
      .choice(MPIACCEL_KEY(P, comm_hook),
              "how gradient buckets are reduced: all-reduce, in 16 bits, or PowerSGD's low-rank factors")
      .choice(MPIACCEL_KEY(P, comm_wrapper),
              "the dtype of PowerSGD's own all-reduces (none: the gradients' dtype)")
      .integer(MPIACCEL_KEY(P, powersgd_rank), at_least(1),
               "rank of PowerSGD's approximation (PyTorch's matrix_approximation_rank)")
      .integer(MPIACCEL_KEY(P, powersgd_start_iter), at_least(0),
               "plain all-reduce for this many steps before PowerSGD starts (start_powerSGD_iter)")
      .real(MPIACCEL_KEY(P, powersgd_min_compression_rate), non_negative(),
            "compress a gradient only if this many times fewer numbers are sent (min_compression_rate)")
      .flag(MPIACCEL_KEY(P, powersgd_error_feedback),
            "add each step's local compression error to the next step's gradient (use_error_feedback)")
      .flag(MPIACCEL_KEY(P, powersgd_warm_start),
            "start each step's power iteration from the last step's Q (warm_start)")
      .real(MPIACCEL_KEY(P, powersgd_orthogonalization_epsilon), non_negative(),
            "added to each column's norm in Gram-Schmidt (orthogonalization_epsilon)")
      .integer(MPIACCEL_KEY(P, powersgd_seed), at_least(0),
               "seed of PowerSGD's initial random Q, the same on every rank (random_seed)");

  using F = FsdpConfig;
  add_zero_plus_plus(rows_of(rows, "fsdp", &Config::fsdp)
      .integer(MPIACCEL_KEY(F, version), between(1, 2), "FSDP API generation (2 = per-parameter)")
      .choice(MPIACCEL_KEY(F, sharding_strategy),
              "what is sharded: params+grads+state, grads+state, or full shard within a group")
      .integer(MPIACCEL_KEY(F, hybrid_group_size), at_least(0),
               "ranks per HYBRID_SHARD group; 0 = the ranks of a node")
      .flag(MPIACCEL_KEY(F, reshard_after_forward),
            "free gathered parameters after forward (false: ZeRO-2-like)")
      .flag(MPIACCEL_KEY(F, cpu_offload), "keep sharded parameters and optimizer state on the CPU")
      .choice(MPIACCEL_KEY(F, auto_wrap_policy),
              "how the model is split into units")
      .text(MPIACCEL_KEY(F, transformer_layer_cls_to_wrap), true,
            "module class names, comma-separated; empty = the bundled model's",
            "unit classes for TRANSFORMER_BASED_WRAP (gpt: DecoderLayer, llama: LlamaDecoderLayer, "
            "mlp: MlpBlock)")
      .integer(MPIACCEL_KEY(F, min_num_params), at_least(1),
               "parameters per unit for SIZE_BASED_WRAP")
      .flag(MPIACCEL_KEY(F, forward_prefetch), "gather the next unit while this one runs forward")
      .choice(MPIACCEL_KEY(F, backward_prefetch),
              "when the next unit is gathered in backward")
      .flag(MPIACCEL_KEY(F, cpu_ram_efficient_loading),
            "only rank 0 materialises full weights; the others receive their shard")
      .flag(MPIACCEL_KEY(F, activation_checkpointing), "recompute unit activations in backward")
      .choice(MPIACCEL_KEY(F, state_dict_type),
              "checkpoint layout: each rank's shards, or consolidated tensors"));

  using Z = ZeroConfig;
  add_zero_plus_plus(rows_of(rows, "zero", &Config::zero)
      .integer(MPIACCEL_KEY(Z, stage), between(0, 3),
               "0 = plain DDP, 1 = shard optimizer state, 2 = + gradients, 3 = + parameters")
      .choice(MPIACCEL_KEY(Z, offload_optimizer),
              "where optimizer state and step live")
      .choice(MPIACCEL_KEY(Z, offload_param),
              "where stage-3 parameter shards live")
      .real(MPIACCEL_KEY(Z, reduce_bucket_mb), positive(), "reduce-scatter bucket size in MiB")
      .real(MPIACCEL_KEY(Z, allgather_bucket_mb), positive(), "all-gather bucket size in MiB"));

  using O = OptimizerConfig;
  rows_of(rows, "optimizer", &Config::optimizer)
      .choice(MPIACCEL_KEY(O, name), "optimizer")
      .real(MPIACCEL_KEY(O, lr), positive(), "peak learning rate")
      .pair(MPIACCEL_KEY(O, betas), below_one(), "AdamW beta1, beta2")
      .real(MPIACCEL_KEY(O, eps), positive(), "AdamW epsilon")
      .real(MPIACCEL_KEY(O, weight_decay), non_negative(), "decoupled weight decay")
      .real(MPIACCEL_KEY(O, momentum), below_one(), "SGD momentum")
      .real(MPIACCEL_KEY(O, grad_clip), non_negative(),
            "clip the global gradient norm to this; 0 = off");

  using S = SchedulerConfig;
  rows_of(rows, "scheduler", &Config::scheduler)
      .choice(MPIACCEL_KEY(S, name),
              "learning-rate schedule after warmup")
      .integer(MPIACCEL_KEY(S, warmup_steps), at_least(0), "steps of linear warmup from 0 to lr")
      .real(MPIACCEL_KEY(S, min_lr_ratio), fraction(),
            "final learning rate of linear/cosine as a fraction of lr");

  using T = TrainConfig;
  rows_of(rows, "train", &Config::train)
      .choice(MPIACCEL_KEY(T, model), {MPIACCEL_MODEL_FAMILIES(MPIACCEL_FAMILY_NAME)},
              "model of the built-in trainer (a family of src/models/families)")
      .choice(MPIACCEL_KEY(T, dataset),
              "training data (tokens: train.tokens/val.tokens; hdf5: arrays)")
      .text(MPIACCEL_KEY(T, data_dir), true, "a directory; empty = the dataset's Debian location",
            "where the dataset's files are (hdf5: the .h5 file, or a directory with train.h5 [val.h5])")
      .text(MPIACCEL_KEY(T, tokenize_from), true, "a text file or directory; empty = none",
            "tokens: text that rank 0 BPE-tokenizes into data_dir when its token files are missing")
      .text(MPIACCEL_KEY(T, hdf5_inputs), false, "an HDF5 dataset path",
            "hdf5: the inputs, shape [N, ...], read as float32; a sample is one row")
      .text(MPIACCEL_KEY(T, hdf5_labels), true, "an HDF5 dataset path; empty = none",
            "hdf5: integer labels [N] read as int64; none: the target is the input")
      .integer(MPIACCEL_KEY(T, batch_size), at_least(1),
               "samples per rank per micro-step (with split_batches: of all ranks together)")
      .flag(MPIACCEL_KEY(T, split_batches),
            "batch_size is the global batch, divided by the world size (Accelerate's split_batches)")
      .integer(MPIACCEL_KEY(T, grad_accum_steps), at_least(1), "micro-steps per optimizer step")
      .integer(MPIACCEL_KEY(T, max_steps), at_least(1), "optimizer steps of the run")
      .integer(MPIACCEL_KEY(T, eval_every), at_least(0), "steps between evaluations; 0 = at the end only")
      .integer(MPIACCEL_KEY(T, eval_batches), at_least(1), "batches per rank per evaluation")
      .integer(MPIACCEL_KEY(T, log_every), at_least(1), "steps between metric lines")
      .integer(MPIACCEL_KEY(T, seq_len), at_least(1), "tokens per GPT sample")
      .real(MPIACCEL_KEY(T, val_fraction), below_one(), "share of the data held out for evaluation")
      .flag(MPIACCEL_KEY(T, drop_last), "drop the last incomplete batch of an epoch")
      .integer(MPIACCEL_KEY(T, num_threads), at_least(1), "torch intra-op threads per rank")
      .integer(MPIACCEL_KEY(T, num_workers), at_least(0),
               "loader threads fetching the next batches during the step; 0 = the training thread")
      .integer(MPIACCEL_KEY(T, prefetch_factor), at_least(1), "batches each loader worker keeps ready")
      .flag(MPIACCEL_KEY(T, pin_memory), "page-locked host batches when the device is a GPU")
      .flag(MPIACCEL_KEY(T, non_blocking),
            "GPU: copy batches on a side stream ordered by an event; false = a synchronous copy")
      .integer(MPIACCEL_KEY(T, sample_tokens), at_least(0),
               "tokens generated at the end of a GPT or Llama run; 0 = none");

  using M = ModelConfig;
  rows_of(rows, "model", &Config::model)
      .integer(MPIACCEL_KEY(M, n_layer), at_least(1), "GPT/Llama decoder layers")
      .integer(MPIACCEL_KEY(M, n_head), at_least(1), "GPT/Llama attention heads (must divide n_embd)")
      .integer(MPIACCEL_KEY(M, n_embd), at_least(1), "GPT/Llama embedding width")
      .integer(MPIACCEL_KEY(M, vocab_size), at_least(1),
               "GPT/Llama vocabulary (256 = bytes; a token file's when left at 256)")
      .real(MPIACCEL_KEY(M, dropout), below_one(), "dropout probability (the Llama's: attention only)")
      .integer(MPIACCEL_KEY(M, hidden_size), at_least(1), "MLP/CNN hidden width")
      .integer(MPIACCEL_KEY(M, mlp_layers), at_least(0), "MLP hidden layers")
      .choice(MPIACCEL_KEY(M, activation),
              "GPT MLP activation; gelu_tanh = GPT-2's gelu_new")
      .integer(MPIACCEL_KEY(M, n_kv_head), at_least(0),
               "Llama key/value heads (grouped-query attention; must divide n_head); 0 = n_head")
      .integer(MPIACCEL_KEY(M, head_dim), at_least(0), "Llama head width; 0 = n_embd / n_head")
      .integer(MPIACCEL_KEY(M, intermediate_size), at_least(0),
               "Llama SwiGLU width; 0 = 8/3 n_embd rounded up to a multiple of 256")
      .real(MPIACCEL_KEY(M, rope_theta), positive(), "Llama rotary embedding base")
      .choice(MPIACCEL_KEY(M, rope_scaling),
              "Llama rotary frequencies; llama3 = Llama 3.1's long-context rescaling")
      .real(MPIACCEL_KEY(M, rope_scaling_factor), positive(), "llama3 scaling: factor")
      .real(MPIACCEL_KEY(M, rope_low_freq_factor), positive(), "llama3 scaling: low_freq_factor")
      .real(MPIACCEL_KEY(M, rope_high_freq_factor), positive(), "llama3 scaling: high_freq_factor")
      .integer(MPIACCEL_KEY(M, rope_original_max_positions), at_least(1),
               "llama3 scaling: original_max_position_embeddings")
      .real(MPIACCEL_KEY(M, rms_norm_eps), positive(), "Llama RMSNorm epsilon")
      .flag(MPIACCEL_KEY(M, attention_bias), "Llama: biases on the q, k, v and o projections")
      .flag(MPIACCEL_KEY(M, mlp_bias), "Llama: biases on the SwiGLU projections")
      .flag(MPIACCEL_KEY(M, tie_word_embeddings),
            "Llama: the head is the token embedding (the GPT's always is)")
      .text(MPIACCEL_KEY(M, init_from), true, "a path; empty = none",
            "start from a pretrained model as from_pretrained does: a Hugging Face directory "
            "(config.json gives the family and shape) or a .safetensors file");

  using C = CheckpointConfig;
  rows_of(rows, "checkpoint", &Config::checkpoint)
      .text(MPIACCEL_KEY(C, dir), false, "a directory", "where checkpoints are written")
      .integer(MPIACCEL_KEY(C, every_steps), at_least(0),
               "steps between checkpoints; 0 = none during training")
      .integer(MPIACCEL_KEY(C, keep_last), at_least(0), "checkpoints kept in dir; 0 = all")
      .text(MPIACCEL_KEY(C, resume), false, "none|latest|PATH",
            "start from no checkpoint, the newest in dir, or a checkpoint path")
      .flag(MPIACCEL_KEY(C, save_at_end), "write a checkpoint after the last step")
      .flag(MPIACCEL_KEY(C, async),
            "write checkpoints in the background: training stalls only for a copy into host "
            "memory (which costs that much memory)");

  using G = LoggingConfig;
  rows_of(rows, "logging", &Config::logging)
      .choice(MPIACCEL_KEY(G, level), "least severe message shown")
      .text(MPIACCEL_KEY(G, metrics_file), true, "a path; empty = off",
            "JSON-lines metrics written by rank 0")
      .choice(MPIACCEL_KEY(G, progress),
              "progress display on rank 0; auto = bar on a terminal, else lines")
      .text(MPIACCEL_KEY(G, trace), true, "a path; empty = off", "Chrome trace JSON of each step")
      .text(MPIACCEL_KEY(G, report_to), false, "jsonl, tensorboard (a list) | all | none",
            "where metrics go: the metrics file and TensorBoard event files (the Trainer's report_to)")
      .text(MPIACCEL_KEY(G, logging_dir), true, "a directory",
            "tensorboard: where the event files go (tensorboard --logdir DIR)");
  return rows;
}

#undef MPIACCEL_KEY

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

const std::vector<KeySpec>& schema() {
  static const std::vector<KeySpec> rows = build_schema();
  return rows;
}

const std::vector<std::string>& schema_sections() {
  static const std::vector<std::string> sections = [] {
    std::vector<std::string> out;
    for (const auto& row : schema()) {
      if (out.empty() || out.back() != row.section) out.push_back(row.section);
    }
    return out;
  }();
  return sections;
}

const KeySpec* find_key(const std::string& section, const std::string& key) {
  for (const auto& row : schema()) {
    if (row.section == section && row.key == key) return &row;
  }
  return nullptr;
}

std::vector<std::string> section_keys(const std::string& section) {
  std::vector<std::string> keys;
  for (const auto& row : schema()) {
    if (row.section == section) keys.push_back(row.key);
  }
  return keys;
}

std::string unknown_name_message(const std::string& section, const std::string& key) {
  const auto& sections = schema_sections();
  bool section_known = false;
  for (const auto& s : sections) section_known |= (s == section);
  if (!section_known) {
    std::string message = "[" + section + "]: unknown section";
    if (auto near = nearest(section, sections)) return message + "; did you mean '" + *near + "'?";
    return message + "; accepted: " + join(sections);
  }
  std::string message = "[" + section + "] " + key + ": unknown key";
  if (auto near = nearest(key, section_keys(section))) {
    return message + "; did you mean '" + *near + "'?";
  }
  // A key put under the wrong section is a common slip ([ddp] stage).
  for (const auto& row : schema()) {
    if (row.key == key) return message + "; it belongs in [" + row.section + "]";
  }
  return message + "; accepted: " + join(section_keys(section));
}

}  // namespace detail
}  // namespace mpiaccel
