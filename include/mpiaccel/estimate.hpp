#pragma once
// Per-rank memory estimates for `mpiaccel estimate-memory` (docs/memory.md):
// parameters, gradients, optimizer state, FSDP's gathered units and
// activations, for each strategy and precision, from the ZeRO paper's model
// (Rajbhandari et al., SC'20) and Korthikanti et al. (2022) for transformer
// activations. Ψ = parameter elements, N = ranks.
//
//   bytes per parameter           p (params)  g (grads)  K (optimizer)
//   fp32                              4           4       slots·4
//   bf16 / fp16 (mixed precision)     2           2       4 + slots·4   (fp32 master + slots)
//   slots: AdamW 2 (exp_avg, exp_avg_sq), SGD with momentum 1, SGD 0.
//   AdamW in mixed precision: K = 12, the paper's constant.
//
//   strategy       params        grads               optimizer
//   ddp            pΨ            gΨ (+gΨ buckets¹)   KΨ
//   ddp, node-shared⁴  pΨ/L      gΨ                  KΨ/L
//   zero1          pΨ            gΨ                  KΨ/N
//   zero2          pΨ            gΨ/N                KΨ/N
//   zero3 / fsdp   pΨ/N + pR²    gΨ/N                KΨ/N     + gathered 2·pU³
//   ¹ DDP's flat buckets are a second copy unless gradient_as_bucket_view.
//   ⁴ [ddp] node_shared_params on CPU ranks of one node: the L ranks of the
//     node hold one copy of the parameters in shared memory, each updates
//     (and keeps the optimizer state of) ⌈rows/L⌉ rows of every parameter.
//   ² R: parameters outside every unit (embeddings, final norm), which FSDP
//     keeps gathered. ³ U: the largest unit, gathered while it runs, plus the
//     next one prefetched; without resharding after forward (SHARD_GRAD_OP)
//     every unit, p(Ψ - R), from the end of forward into backward.
// Ψ/N is the largest rank's share: every strategy cuts each parameter along
// dim 0 with torch.chunk, so a rank holds ⌈rows/N⌉ rows of each (FSDP's
// shard blocks and ZeRO-2's gradient shards are padded to exactly that on
// every rank); Σ ⌈rows/N⌉·row_numel ≥ ⌈Ψ/N⌉.
// Offload moves the fp32 state to host memory: zero1/zero2 + offload keep the
// optimizer state, an fp32 master and an fp32 gradient shard on the host
// ((8 + slots·4)Ψ/N); fsdp + offload keeps the parameter, gradient and
// optimizer shards there ((8 + slots·4)Ψ/N), the device only R and the
// gathered units. The host bytes are split by kind (param: the fp32
// shard/master, grad: the fp32 gradient shard, optimizer: the slots) so they
// compare with Strategy::memory(), which counts device and host together.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/config.hpp"
#include "mpiaccel/model_family.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel {

/// One parameter as the strategies shard it: `rows` along dim 0 (1 for a
/// 0-d tensor) of `row_numel` elements each.
struct ParamRows {
  int64_t rows = 1;
  int64_t row_numel = 1;
  bool operator==(const ParamRows& o) const { return rows == o.rows && row_numel == o.row_numel; }
};

/// The parameter counts the estimate needs, for one model.
struct ModelFootprint {
  std::string kind;                 ///< the family's name
  int64_t params = 0;               ///< Ψ (the tied GPT head counted once)
  int64_t largest_unit_params = 0;  ///< U: the biggest unit (DecoderLayer, MlpBlock); 0 without units
  int64_t root_params = 0;          ///< R: parameters in no unit
  int64_t units = 0;                ///< number of units
  /// Every parameter once, in registration order; empty: shards are taken
  /// as ⌈Ψ/N⌉ (a model described by its count alone).
  std::vector<ParamRows> tensors;
};

/// Elements of the largest rank's shard of `model` over `world` ranks:
/// Σ ⌈rows/N⌉·row_numel over model.tensors (⌈Ψ/N⌉ when the list is empty).
int64_t shard_elements(const ModelFootprint& model, int world);

/// The footprint of a bundled model, counted from a shape-only build of its
/// family (make_model_shapes: no values, no memory, so any size can be
/// asked), as one rank of `tp` tensor-parallel ranks holds it (each
/// parameter as the family's ModelFamily::tensor_split says:
/// docs/parallelism.md). Throws Error for an unknown kind, and for sizes tp
/// does not divide.
ModelFootprint model_footprint(const std::string& kind, const ModelSpec& spec, int64_t tp = 1);
/// The footprint of one pipeline rank of a bundled GPT or Llama holding the
/// layers of `stages` (each [begin, end), as pipeline_cut gives them): their
/// layers, the first piece (embeddings) if a stage starts at layer 0, the
/// last piece (final norm and head, the tied embedding again) if one ends at
/// the last layer. Throws Error for a model without pipeline pieces.
ModelFootprint pipeline_stage_footprint(const std::string& kind, const ModelSpec& spec, int64_t tp,
                                        const std::vector<std::pair<int64_t, int64_t>>& stages);
/// The footprint counted from a built model: units are the modules whose
/// Module::name() is one of `unit_classes`. Exact; what the closed form is
/// tested against.
ModelFootprint count_footprint(Model& model, const std::vector<std::string>& unit_classes);

/// Estimated bytes of activations kept for backward for one micro-batch of
/// `batch` samples, each activation of `element_bytes` (4 fp32, 2 bf16/fp16).
/// GPT, per layer (Korthikanti et al., eq. 2, scaled from their 2-byte
/// activations): (34·B·T·C + 5·B·H·T²)·element_bytes/2, plus the head
/// 4·B·T·C·element_bytes/2 + 4·B·T·V (fp32 log-probabilities). With
/// checkpointing: each layer's input B·T·C·element_bytes, plus one layer
/// recomputed, plus the head. MLP and CNN: the tensors their layers save.
/// Under tensor parallelism over `tp` ranks (Korthikanti et al., eq. 3-5):
/// the heads', the MLP's and the logits' tensors 1/tp, the norms', dropout's
/// and residual's whole, or with `sequence_parallel` 1/tp too.
int64_t activation_bytes(const std::string& kind, const ModelSpec& spec, int64_t batch,
                         int64_t element_bytes, bool checkpointing, int64_t tp = 1,
                         bool sequence_parallel = false);

/// Optimizer state slots per parameter (fp32 tensors of its shape).
int64_t optimizer_slots(const OptimizerConfig& optimizer);

/// One row of the estimate, bytes per rank.
struct MemoryEstimate {
  StrategyKind kind = StrategyKind::Ddp;       ///< Ddp, Zero1, Zero2 or Fsdp (= ZeRO-3)
  std::string strategy;       ///< its name: ddp | zero1 | zero2 | fsdp
  bool offload = false;
  MixedPrecision mixed_precision = MixedPrecision::No;
  std::string precision;      ///< its name: fp32 | bf16 | fp16
  int world_size = 1;          ///< all ranks: data-parallel ranks × tp_size
  int tp_size = 1;             ///< tensor-parallel ranks: each holds its slices
  int pp_size = 1;             ///< pipeline stages: the row is the heaviest stage's rank
  int64_t param_bytes = 0;      ///< device: parameters resident between steps
  int64_t grad_bytes = 0;       ///< device
  int64_t optimizer_bytes = 0;  ///< device (incl. the fp32 master in mixed precision)
  int64_t gathered_bytes = 0;   ///< device, transient: FSDP's gathered units
  int64_t activation_bytes = 0; ///< device, per micro-batch
  int64_t host_param_bytes = 0;     ///< host: fp32 parameter shards / masters (offload)
  int64_t host_grad_bytes = 0;      ///< host: fp32 gradient shards (offload)
  int64_t host_optimizer_bytes = 0; ///< host: optimizer slots (offload)

  /// Model states resident on the device (params + grads + optimizer).
  int64_t model_state_bytes() const { return param_bytes + grad_bytes + optimizer_bytes; }
  /// Everything offloaded to host memory.
  int64_t host_bytes() const { return host_param_bytes + host_grad_bytes + host_optimizer_bytes; }
  /// The device's peak estimate: model states + gathered + activations.
  int64_t device_peak_bytes() const { return model_state_bytes() + gathered_bytes + activation_bytes; }
};

/// What else a row depends on.
struct EstimateSettings {
  int world_size = 1;  ///< the ranks the strategy shards over: the data-parallel ranks
  /// Tensor parallelism: the model (footprint) is one rank's slices already;
  /// this scales the activations.
  int tp_size = 1;
  bool sequence_parallel = false;
  /// Context parallelism: each rank's activations are those of seq_len /
  /// cp_size positions (attention by flash kernels keeps no [T, T] weights,
  /// so the estimate's quadratic attention term, of the shard, is an upper
  /// bound). The strategy shards over world_size, which counts the cp ranks.
  int cp_size = 1;
  int64_t optimizer_slots = 2;           ///< AdamW
  bool gradient_as_bucket_view = false;  ///< [ddp]
  /// [ddp] node_shared_params: the ranks sharing one copy of the parameters
  /// (the CPU ranks of a one-node job); 1 = every rank its own copy (GPUs,
  /// several nodes).
  int node_shared_ranks = 1;
  int64_t batch_size = 8;                ///< per rank, per micro-step
  bool activation_checkpointing = false;
  /// fsdp: false for SHARD_GRAD_OP or [fsdp] reshard_after_forward = false
  /// (every unit stays gathered from its forward to its backward).
  bool reshard_after_forward = true;
};

/// One strategy (ZeRO-3 counts as FSDP) at one precision. The function the
/// FSDP/ZeRO accounting tests compare their measured Strategy::memory()
/// with. Throws Error for offload with DDP (or no strategy).
MemoryEstimate estimate_memory(const ModelFootprint& model, const ModelSpec& spec, StrategyKind strategy,
                               bool offload, MixedPrecision precision, const EstimateSettings& settings);

/// The estimate of `config`'s model ([train] model, [model], [train]
/// seq_len/batch_size, [optimizer], [ddp], [fsdp] activation_checkpointing,
/// sharding_strategy and reshard_after_forward)
/// on `world_size` ranks (with [parallelism] tp_size: its slices, sharded
/// over the world size / tp_size data-parallel ranks; with pp_size: the
/// heaviest pipeline rank's stages and in-flight microbatches): every
/// strategy, with and without offload, at fp32, bf16 and fp16.
std::vector<MemoryEstimate> estimate_all(const Config& config, int world_size);

/// The rows as a table like `accelerate estimate-memory` (sizes in KiB, MiB
/// or GiB), with a header naming the model and Ψ.
std::string format_estimate_table(const Config& config, const ModelFootprint& model,
                                  const std::vector<MemoryEstimate>& rows);
/// The same as one JSON object: {"model": {...}, "world_size": N, "rows": [...]}, bytes exact.
std::string format_estimate_json(const Config& config, const ModelFootprint& model,
                                 const std::vector<MemoryEstimate>& rows);

}  // namespace mpiaccel
