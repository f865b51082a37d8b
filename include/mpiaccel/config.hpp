#pragma once
// The run configuration: an INI file (read with inih) parsed strictly into
// typed structs. Sections and keys mirror Hugging Face Accelerate's config so a
// user can map one onto the other (docs/config.md lists every key). One schema
// table (src/config/schema.cpp) gives each key its type, default, accepted
// values or range and a one-line help; parsing, validation, the
// `section.key=value` overrides and to_ini() all read that table.
//
// Errors are one line: "FILE:LINE: [section] key: what is wrong; accepted: ...".

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiaccel/config_choices.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {

struct LaunchConfig {
  int64_t num_machines = 1;
  int64_t num_processes = 1;        ///< total ranks
  LauncherChoice launcher = LauncherChoice::Auto;  ///< auto | mpirun | srun
  int64_t cpus_per_process = 0;     ///< 0 = cores of the node / ranks per node
  std::string mpirun_args;          ///< extra arguments for mpirun
  std::string srun_args;            ///< extra arguments for srun
};

struct DistributedConfig {
  StrategyChoice strategy = StrategyChoice::No;  ///< no | ddp | fsdp | zero
  Backend backend = Backend::Auto;  ///< auto | mpi | nccl
  MixedPrecision mixed_precision = MixedPrecision::No;  ///< no | bf16 | fp16
  DtypeChoice param_dtype = DtypeChoice::Auto;  ///< auto | fp32 | bf16 | fp16 (auto: from mixed_precision)
  DtypeChoice reduce_dtype = DtypeChoice::Auto;
  DtypeChoice buffer_dtype = DtypeChoice::Auto;
  double timeout_s = 1800;              ///< deadline of every collective
  int64_t seed = 42;
  DevicePreference device = DevicePreference::Auto;  ///< auto | cpu | cuda
  bool allow_gpu_sharing = false;       ///< allow several ranks on one GPU
};

/// The device mesh (docs/parallelism.md): the ranks as a grid of
/// dp_replicate × dp_shard × tp. The data-parallel dimensions' product is the
/// world size / tp_size; one of them may be 0 = auto. [distributed] strategy
/// says what each data-parallel dimension does: ddp replicates over both, fsdp
/// shards over dp_shard and replicates over dp_replicate (HSDP), zero shards
/// over both. tp is innermost: the ranks of one tensor-parallel group are
/// consecutive, on one node unless tp_across_nodes.
struct ParallelismConfig {
  int64_t dp_replicate_size = 1;  ///< 0 = auto
  int64_t dp_shard_size = 0;      ///< 0 = auto
  int64_t tp_size = 1;            ///< tensor-parallel ranks (Megatron-style)
  bool tp_across_nodes = false;   ///< allow a tp group to span nodes
  bool sequence_parallel = false; ///< norms and dropout on sequence shards (tp > 1)
  int64_t pp_size = 1;            ///< pipeline stages (ranks along the pipeline)
  /// gpipe | 1f1b | interleaved_1f1b | zb_h1 (docs/parallelism.md)
  PipelineScheduleKind pp_schedule = PipelineScheduleKind::OneFOneB;
  int64_t pp_virtual_stages = 0;  ///< stages per rank; 0 = 2 for interleaved_1f1b, else 1
  int64_t pp_microbatches = 0;    ///< per optimizer step; 0 = [train] grad_accum_steps
  std::string pp_layers;          ///< "0-3,4-7": each stage's layers; "" = balanced
  int64_t cp_size = 1;            ///< context-parallel ranks (the sequence split for attention)
  CpCommStrategy cp_comm_strategy = CpCommStrategy::Ring;  ///< ring | alltoall
};

struct DdpConfig {
  double bucket_cap_mb = 25;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = true;
  bool static_graph = false;
  bool node_shared_params = true;  ///< one parameter copy per node, each rank steps its rows
  /// How each bucket is reduced (comm_hook.hpp): none (all-reduce) | fp16 |
  /// bf16 | powersgd | batched_powersgd; Accelerate's spellings no,
  /// power_sgd, batched_power_sgd too.
  CommHookChoice comm_hook = CommHookChoice::None;
  CommWrapperChoice comm_wrapper = CommWrapperChoice::None;  ///< PowerSGD's own all-reduces in: none | fp16 | bf16
  int64_t powersgd_rank = 1;
  int64_t powersgd_start_iter = 1000;
  double powersgd_min_compression_rate = 2;
  bool powersgd_error_feedback = true;
  bool powersgd_warm_start = true;
  double powersgd_orthogonalization_epsilon = 0;
  int64_t powersgd_seed = 0;
};

struct FsdpConfig {
  int64_t version = 2;
  ShardingStrategy sharding_strategy = ShardingStrategy::FullShard;  ///< FULL_SHARD | SHARD_GRAD_OP | HYBRID_SHARD
  int64_t hybrid_group_size = 0;                 ///< ranks per shard group; 0 = ranks of a node
  bool reshard_after_forward = true;
  bool cpu_offload = false;
  WrapPolicy auto_wrap_policy = WrapPolicy::TransformerBasedWrap;  ///< | SIZE_BASED_WRAP | NO_WRAP
  /// Unit classes (Module::name()s, comma-separated); "" = the bundled
  /// model's own (units_to_wrap in models.hpp): DecoderLayer for the GPT,
  /// LlamaDecoderLayer for the Llama, MlpBlock for the MLP.
  std::string transformer_layer_cls_to_wrap;
  int64_t min_num_params = 100000000;
  bool forward_prefetch = true;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::Pre;  ///< BACKWARD_PRE | BACKWARD_POST | NO_PREFETCH
  bool cpu_ram_efficient_loading = true;
  bool activation_checkpointing = false;
  StateDictType state_dict_type = StateDictType::Sharded;  ///< SHARDED_STATE_DICT | FULL_STATE_DICT
  bool quantized_weights = false;  ///< ZeRO++ qwZ: parameters all-gathered in int8 with block scales
  /// ZeRO++ hpZ: groups of this many consecutive ranks keep a second shard of
  /// each unit from forward, and backward gathers within the group; 1 = off,
  /// 0 = the ranks of one node.
  int64_t secondary_partition_size = 1;
  bool quantized_gradients = false;  ///< ZeRO++ qgZ: gradients reduce-scattered in int8 by all-to-all
};

struct ZeroConfig {
  int64_t stage = 2;                          ///< 0..3
  OffloadChoice offload_optimizer = OffloadChoice::None;  ///< none | cpu
  OffloadChoice offload_param = OffloadChoice::None;      ///< none | cpu
  double reduce_bucket_mb = 25;
  double allgather_bucket_mb = 25;
  bool quantized_weights = false;  ///< stage 3: ZeRO++ qwZ (int8 all-gather of parameters)
  int64_t secondary_partition_size = 1;  ///< stage 3: ZeRO++ hpZ (as [fsdp]'s)
  bool quantized_gradients = false;      ///< stage 3: ZeRO++ qgZ (int8 gradient reduce-scatter)
};

struct OptimizerConfig {
  OptimizerChoice name = OptimizerChoice::AdamW;  ///< adamw | sgd
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.01;
  double momentum = 0.0;                ///< sgd only
  double grad_clip = 1.0;               ///< max global grad norm; 0 = off
};

struct SchedulerConfig {
  LrSchedule name = LrSchedule::Constant;  ///< constant | linear | cosine
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.0;            ///< floor of linear/cosine as a fraction of lr
};

/// [train] model when a config names none: the family that
/// src/models/CMakeLists.txt declares the default.
std::string default_model_family();

struct TrainConfig {
  std::string model = default_model_family();  ///< a model family (include/mpiaccel/model_family.hpp)
  DatasetChoice dataset = DatasetChoice::Fortunes;  ///< fortunes | fashion-mnist | tokens | hdf5
  std::string data_dir;                 ///< "" = the dataset's Debian location; hdf5: a file or directory
  /// tokens: raw text (a file or directory) that rank 0 BPE-tokenizes into
  /// data_dir when train.tokens or val.tokens is missing ("" = none).
  std::string tokenize_from;
  std::string hdf5_inputs = "/inputs";  ///< hdf5: dataset path of the inputs [N, ...]
  std::string hdf5_labels = "/labels";  ///< hdf5: dataset path of the int labels [N]; "" = none
  int64_t batch_size = 8;               ///< per rank, per micro-step
  int64_t grad_accum_steps = 1;
  int64_t max_steps = 100;
  int64_t eval_every = 50;              ///< 0 = only at the end
  int64_t eval_batches = 20;
  int64_t log_every = 10;
  int64_t seq_len = 128;
  double val_fraction = 0.05;           ///< share of the text held out
  bool drop_last = true;
  int64_t num_threads = 1;              ///< torch intra-op threads per rank
  int64_t sample_tokens = 200;          ///< generated at the end of a GPT or Llama run; 0 = none
  /// The loader's threads (docs/data_and_models.md, "Loader workers"): they
  /// assemble the next batches while the step runs; 0 = the training thread.
  int64_t num_workers = 0;
  int64_t prefetch_factor = 2;          ///< batches each worker keeps ready
  bool pin_memory = true;               ///< page-locked host batches when the device is a GPU
  /// Copy batches to the GPU on a side stream, ordered by an event
  /// (Accelerate's accelerator_config.non_blocking).
  bool non_blocking = false;
  /// batch_size is the global batch, split across the ranks (Accelerate's
  /// split_batches); it must divide by the world size.
  bool split_batches = false;
};

struct ModelConfig {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t vocab_size = 256;             ///< byte-level text
  double dropout = 0.0;
  int64_t hidden_size = 256;            ///< MLP/CNN hidden width
  int64_t mlp_layers = 2;               ///< MLP hidden layers
  Activation activation = Activation::Gelu;  ///< GPT MLP: gelu (exact) | gelu_tanh (GPT-2's gelu_new)
  // The Llama's own ([train] model = llama; docs/data_and_models.md, "Llama").
  int64_t n_kv_head = 0;                ///< key/value heads (grouped-query attention); 0 = n_head
  int64_t head_dim = 0;                 ///< 0 = n_embd / n_head
  int64_t intermediate_size = 0;        ///< SwiGLU width; 0 = 8/3 n_embd rounded up to 256
  double rope_theta = 10000.0;          ///< the rotary embedding's base
  RopeScaling rope_scaling = RopeScaling::None;  ///< none | llama3 (Llama 3.1's long-context frequencies)
  double rope_scaling_factor = 8.0;     ///< llama3: factor
  double rope_low_freq_factor = 1.0;    ///< llama3: low_freq_factor
  double rope_high_freq_factor = 4.0;   ///< llama3: high_freq_factor
  int64_t rope_original_max_positions = 8192;  ///< llama3: original_max_position_embeddings
  double rms_norm_eps = 1e-5;
  bool attention_bias = false;          ///< biases on q, k, v and o projections
  bool mlp_bias = false;                ///< biases on the SwiGLU projections
  bool tie_word_embeddings = false;     ///< the Llama's head is the token embedding (the GPT's always is)
  /// A pretrained model to start from ("" = none): a Hugging Face model
  /// directory (GPT2LMHeadModel for the GPT, LlamaForCausalLM for the Llama)
  /// or a .safetensors file.
  std::string init_from;
};

struct CheckpointConfig {
  std::string dir = "checkpoints";
  int64_t every_steps = 0;              ///< 0 = never during training
  int64_t keep_last = 3;                ///< 0 = keep all
  std::string resume = "none";          ///< none | latest | PATH
  bool save_at_end = true;
  /// Write in the background after a snapshot into host memory
  /// (docs/checkpoint.md, "Asynchronous save").
  bool async = true;
};

struct LoggingConfig {
  LogLevel level = LogLevel::Info;      ///< debug | info | warn | error
  std::string metrics_file = "metrics.jsonl";
  ProgressMode progress = ProgressMode::Auto;  ///< auto | bar | lines | off
  std::string trace;                    ///< Chrome trace JSON path; "" = off
  /// Where metrics go (the Trainer's report_to): a list of jsonl (metrics_file)
  /// and tensorboard (event files in logging_dir), or none.
  std::string report_to = "jsonl";
  std::string logging_dir = "runs";     ///< tensorboard: the event files' directory
};

/// A problem in a config file or override. message() is the one-line
/// "FILE:LINE: [section] key: what; accepted: ..." message.
class ConfigError : public Error {
 public:
  using Error::Error;
};

struct Config {
  LaunchConfig launch;
  DistributedConfig distributed;
  ParallelismConfig parallelism;
  DdpConfig ddp;
  FsdpConfig fsdp;
  ZeroConfig zero;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  TrainConfig train;
  ModelConfig model;
  CheckpointConfig checkpoint;
  LoggingConfig logging;

  /// Parses INI `text` (its name for messages: `source`, e.g. the file path),
  /// then applies `overrides` ("section.key=value", in order). Keys not given
  /// keep their defaults. Throws ConfigError.
  static Config parse(const std::string& text, const std::string& source,
                      const std::vector<std::string>& overrides = {});
  /// Reads `path` and parses it (single process; under MPI use
  /// load_config() of the comm module, which reads on rank 0 only).
  static Config load_file(const std::string& path,
                          const std::vector<std::string>& overrides = {});
  /// Defaults with `overrides` applied.
  static Config defaults(const std::vector<std::string>& overrides = {});

  /// Sets one key from its text form, validated like the file ("section.key").
  void set(const std::string& dotted_key, const std::string& value);
  /// The value of one key in its INI text form.
  std::string get(const std::string& dotted_key) const;

  /// The resolved configuration as a commented INI text that parse() reads
  /// back to an equal Config: every section and key, with its help line and
  /// accepted values as comments.
  std::string to_ini() const;
};

bool operator==(const Config& a, const Config& b);
inline bool operator!=(const Config& a, const Config& b) { return !(a == b); }

/// The strategy a config asks for, decided once from [distributed] strategy
/// and [zero] stage: ZeRO stage 0 is DDP (with the [ddp] keys), stage 3 is
/// FSDP full shard.
enum class StrategyKind { NoDist, Ddp, Zero1, Zero2, Fsdp, Zero3 };
StrategyKind strategy_kind(const Config& config);
/// True for the kinds that shard parameters (FSDP, ZeRO-3).
bool shards_parameters(const Config& config);
/// The strategy's name in logs and checkpoints: no, ddp, zero1, zero2, fsdp, zero3.
std::string strategy_name(StrategyKind kind);

/// Where the data-parallel ranks of a mesh stand, as the strategy needs it:
/// `replicas` copies ([parallelism] dp_replicate_size) of groups of
/// `shard_ranks` ranks that shard together (dp_shard × cp). The default is a
/// flat group: no replicas, the group size left to [fsdp].
struct DataParallelShape {
  int64_t replicas = 1;
  int64_t shard_ranks = 0;  ///< 0 = not from a mesh
};

/// The data-parallel strategy of a config, resolved once, with the checks
/// that need several keys or sections (src/config/strategy_plan.cpp). Each
/// strategy reads only its own settings from here: ZeRO-3's keys are folded
/// into `fsdp` (full shard, [zero] offload_param and ZeRO++), and FSDP on a
/// mesh with replicas is HSDP (HYBRID_SHARD over groups of shard_ranks).
/// Throws ConfigError for settings that contradict each other.
struct StrategyPlan {
  StrategyKind kind = StrategyKind::NoDist;
  DdpConfig ddp;    ///< Ddp (ZeRO stage 0 too)
  ZeroConfig zero;  ///< Zero1, Zero2
  FsdpConfig fsdp;  ///< Fsdp, Zero3
};
StrategyPlan resolve_strategy(const Config& config, const DataParallelShape& shape = {});

/// Where [checkpoint] resume points: nowhere, the newest checkpoint of
/// [checkpoint] dir (if there is one yet), or a checkpoint's path.
struct ResumeFrom {
  enum class Kind { None, Latest, Path };
  Kind kind = Kind::None;
  std::string path;  ///< Path only
};
ResumeFrom resume_from(const CheckpointConfig& checkpoint);

/// [logging] report_to as its targets; throws ConfigError naming an unknown one.
struct ReportTargets {
  bool jsonl = false;
  bool tensorboard = false;
};
ReportTargets report_targets(const LoggingConfig& logging);

/// The items of a comma-separated list, each trimmed of blanks, empty items
/// dropped ("DecoderLayer, MlpBlock" → {"DecoderLayer", "MlpBlock"}).
std::vector<std::string> split_list(const std::string& text);

/// One row of the schema, for docs, the config wizard and tools.
struct ConfigKeyInfo {
  std::string section;
  std::string key;
  std::string type;       ///< bool | int | size (>= 1 or auto) | float | string | choice | float_pair
  std::string default_value;
  std::string accepted;   ///< "no|ddp|fsdp|zero", ">= 1", "0..3", "any text"
  std::string help;
};
/// Every key of the schema, in file order.
const std::vector<ConfigKeyInfo>& config_schema();

}  // namespace mpiaccel
