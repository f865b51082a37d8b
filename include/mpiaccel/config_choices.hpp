#pragma once
// The values of the config's choice keys as enums, and their spellings in a
// config file. The file's text is read into these once, when the Config is
// parsed (src/config/schema.cpp); everything past src/config compares enums,
// never text (cmake/check_config_values.py holds src/ to that in make test).
//
// Each enum has one table, Choices<E>::names: the first spelling of a value is
// the one to_ini() and name_of() write; later spellings of the same value are
// accepted aliases (Accelerate's "power_sgd" for "powersgd").

#include <string>

namespace mpiaccel {

enum class LauncherChoice { Auto, Mpirun, Srun };               ///< [launch] launcher
enum class StrategyChoice { No, Ddp, Fsdp, Zero };               ///< [distributed] strategy
enum class Backend { Auto, Mpi, Nccl };                    ///< [distributed] backend
enum class MixedPrecision { No, Bf16, Fp16 };                    ///< [distributed] mixed_precision
enum class DtypeChoice { Auto, Fp32, Bf16, Fp16 };               ///< [distributed] param/reduce/buffer_dtype
enum class DevicePreference { Auto, Cpu, Cuda };                     ///< [distributed] device
/// [parallelism] pp_schedule (docs/parallelism.md).
enum class PipelineScheduleKind { GPipe, OneFOneB, Interleaved1F1B, ZeroBubbleH1 };
enum class CpCommStrategy { Ring, AllToAll };                    ///< [parallelism] cp_comm_strategy
enum class CommHookChoice { None, Fp16, Bf16, PowerSgd, BatchedPowerSgd };  ///< [ddp] comm_hook
enum class CommWrapperChoice { None, Fp16, Bf16 };               ///< [ddp] comm_wrapper
enum class ShardingStrategy { FullShard, ShardGradOp, HybridShard };  ///< [fsdp] sharding_strategy
enum class WrapPolicy { TransformerBasedWrap, SizeBasedWrap, NoWrap };  ///< [fsdp] auto_wrap_policy
enum class BackwardPrefetch { Pre, Post, None };                 ///< [fsdp] backward_prefetch
enum class StateDictType { Sharded, Full };                      ///< [fsdp] state_dict_type
enum class OffloadChoice { None, Cpu };                          ///< [zero] offload_optimizer/param
enum class OptimizerChoice { AdamW, Sgd };                       ///< [optimizer] name
enum class LrSchedule { Constant, Linear, Cosine };              ///< [scheduler] name
enum class DatasetChoice { Fortunes, FashionMnist, Tokens, Hdf5 };  ///< [train] dataset
enum class Activation { Gelu, GeluTanh };                        ///< [model] activation
enum class RopeScaling { None, Llama3 };                         ///< [model] rope_scaling
enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };  ///< [logging] level
enum class ProgressMode { Auto, Bar, Lines, Off };               ///< [logging] progress

/// One spelling of a value.
template <class E>
struct ChoiceName {
  E value;
  const char* name;
};

/// The spellings of each enum above (specialised below).
template <class E>
struct Choices;

#define MPIACCEL_CHOICES(E, ...) \
  template <>                    \
  struct Choices<E> {            \
    static constexpr ChoiceName<E> names[] = {__VA_ARGS__}; \
  }

MPIACCEL_CHOICES(LauncherChoice, {LauncherChoice::Auto, "auto"}, {LauncherChoice::Mpirun, "mpirun"},
                 {LauncherChoice::Srun, "srun"});
MPIACCEL_CHOICES(StrategyChoice, {StrategyChoice::No, "no"}, {StrategyChoice::Ddp, "ddp"},
                 {StrategyChoice::Fsdp, "fsdp"}, {StrategyChoice::Zero, "zero"});
MPIACCEL_CHOICES(Backend, {Backend::Auto, "auto"}, {Backend::Mpi, "mpi"},
                 {Backend::Nccl, "nccl"});
MPIACCEL_CHOICES(MixedPrecision, {MixedPrecision::No, "no"}, {MixedPrecision::Bf16, "bf16"},
                 {MixedPrecision::Fp16, "fp16"});
MPIACCEL_CHOICES(DtypeChoice, {DtypeChoice::Auto, "auto"}, {DtypeChoice::Fp32, "fp32"}, {DtypeChoice::Bf16, "bf16"},
                 {DtypeChoice::Fp16, "fp16"});
MPIACCEL_CHOICES(DevicePreference, {DevicePreference::Auto, "auto"}, {DevicePreference::Cpu, "cpu"}, {DevicePreference::Cuda, "cuda"});
MPIACCEL_CHOICES(PipelineScheduleKind, {PipelineScheduleKind::GPipe, "gpipe"},
                 {PipelineScheduleKind::OneFOneB, "1f1b"},
                 {PipelineScheduleKind::Interleaved1F1B, "interleaved_1f1b"},
                 {PipelineScheduleKind::ZeroBubbleH1, "zb_h1"});
MPIACCEL_CHOICES(CpCommStrategy, {CpCommStrategy::Ring, "ring"}, {CpCommStrategy::AllToAll, "alltoall"});
MPIACCEL_CHOICES(CommHookChoice, {CommHookChoice::None, "none"}, {CommHookChoice::None, "no"},
                 {CommHookChoice::Fp16, "fp16"}, {CommHookChoice::Bf16, "bf16"},
                 {CommHookChoice::PowerSgd, "powersgd"}, {CommHookChoice::PowerSgd, "power_sgd"},
                 {CommHookChoice::BatchedPowerSgd, "batched_powersgd"},
                 {CommHookChoice::BatchedPowerSgd, "batched_power_sgd"});
MPIACCEL_CHOICES(CommWrapperChoice, {CommWrapperChoice::None, "none"}, {CommWrapperChoice::None, "no"},
                 {CommWrapperChoice::Fp16, "fp16"}, {CommWrapperChoice::Bf16, "bf16"});
MPIACCEL_CHOICES(ShardingStrategy, {ShardingStrategy::FullShard, "FULL_SHARD"},
                 {ShardingStrategy::ShardGradOp, "SHARD_GRAD_OP"}, {ShardingStrategy::HybridShard, "HYBRID_SHARD"});
MPIACCEL_CHOICES(WrapPolicy, {WrapPolicy::TransformerBasedWrap, "TRANSFORMER_BASED_WRAP"},
                 {WrapPolicy::SizeBasedWrap, "SIZE_BASED_WRAP"}, {WrapPolicy::NoWrap, "NO_WRAP"});
MPIACCEL_CHOICES(BackwardPrefetch, {BackwardPrefetch::Pre, "BACKWARD_PRE"}, {BackwardPrefetch::Post, "BACKWARD_POST"},
                 {BackwardPrefetch::None, "NO_PREFETCH"});
MPIACCEL_CHOICES(StateDictType, {StateDictType::Sharded, "SHARDED_STATE_DICT"}, {StateDictType::Full, "FULL_STATE_DICT"});
MPIACCEL_CHOICES(OffloadChoice, {OffloadChoice::None, "none"}, {OffloadChoice::Cpu, "cpu"});
MPIACCEL_CHOICES(OptimizerChoice, {OptimizerChoice::AdamW, "adamw"}, {OptimizerChoice::Sgd, "sgd"});
MPIACCEL_CHOICES(LrSchedule, {LrSchedule::Constant, "constant"}, {LrSchedule::Linear, "linear"},
                 {LrSchedule::Cosine, "cosine"});
MPIACCEL_CHOICES(DatasetChoice, {DatasetChoice::Fortunes, "fortunes"}, {DatasetChoice::FashionMnist, "fashion-mnist"},
                 {DatasetChoice::Tokens, "tokens"}, {DatasetChoice::Hdf5, "hdf5"});
MPIACCEL_CHOICES(Activation, {Activation::Gelu, "gelu"}, {Activation::GeluTanh, "gelu_tanh"});
MPIACCEL_CHOICES(RopeScaling, {RopeScaling::None, "none"}, {RopeScaling::Llama3, "llama3"});
MPIACCEL_CHOICES(LogLevel, {LogLevel::Debug, "debug"}, {LogLevel::Info, "info"}, {LogLevel::Warn, "warn"},
                 {LogLevel::Error, "error"});
MPIACCEL_CHOICES(ProgressMode, {ProgressMode::Auto, "auto"}, {ProgressMode::Bar, "bar"}, {ProgressMode::Lines, "lines"},
                 {ProgressMode::Off, "off"});

#undef MPIACCEL_CHOICES

/// How a config file writes `value` ("fsdp", "HYBRID_SHARD").
template <class E>
std::string name_of(E value) {
  for (const auto& c : Choices<E>::names)
    if (c.value == value) return c.name;
  return "?";
}

/// Every spelling of E, "a|b|c", as error messages list them.
template <class E>
std::string choice_names() {
  std::string out;
  for (const auto& c : Choices<E>::names) out += (out.empty() ? "" : "|") + std::string(c.name);
  return out;
}

namespace detail {
/// Whether `text` is `name`, ignoring case (config values are matched so).
bool same_choice_name(const std::string& text, const char* name);
[[noreturn]] void throw_unknown_choice(const std::string& what, const std::string& text, const std::string& accepted);
}  // namespace detail

/// The value `text` spells, matched case-insensitively; throws Error
/// "WHAT = TEXT is unknown; accepted: a|b|c" (`what` names the key,
/// e.g. "[parallelism] pp_schedule").
template <class E>
E choice_named(const std::string& text, const std::string& what) {
  for (const auto& c : Choices<E>::names)
    if (detail::same_choice_name(text, c.name)) return c.value;
  detail::throw_unknown_choice(what, text, choice_names<E>());
}

}  // namespace mpiaccel
