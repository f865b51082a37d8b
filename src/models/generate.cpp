// generate() and generate_tokens(): sampling from a text model through its
// KV cache; and what the text models share (models/causal_lm.hpp).

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "context_parallel/block_attention.hpp"
#include "models/attention.hpp"
#include "models/causal_lm.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel {
namespace detail {

at::Tensor TextModel::loss(const at::Tensor& output, const at::Tensor& target_tokens) {
  const at::Tensor target = current_context().local_tokens(target_tokens);
  MPIACCEL_CHECK(target.sizes() == output.sizes().slice(0, 2),
                 name_ + " loss: the target's " + std::to_string(target.size(1)) + " positions are not the " +
                     std::to_string(output.size(1)) + " of the logits" +
                     (cp_ ? " (under context parallelism give the whole target; the logits are this rank's shard)"
                          : ""));
  if (tp_) return tp::vocab_parallel_cross_entropy(output.reshape({-1, output.size(-1)}), target.reshape({-1}), tp_);
  return at::cross_entropy_loss(output.reshape({-1, output.size(-1)}), target.reshape({-1}));
}

at::Tensor TextModel::forward_cached(const at::Tensor& tokens, KvCache& cache) {
  const tp::WholeSequence one_position_at_a_time;
  const at::Tensor logits = run(tokens, &cache);
  return tp_ ? tp::gather_from_parallel(logits, -1, tp_) : logits;
}

at::Tensor TextModel::whole_logits(const at::Tensor& tokens) {
  const tp::WholeSequence any_length;
  const at::Tensor logits = run(tokens, nullptr);
  return tp_ ? tp::gather_from_parallel(logits, -1, tp_) : logits;
}

void check_tp_divides(int64_t value, const std::string& key, int64_t ranks, const std::string& why) {
  MPIACCEL_CHECK(value % ranks == 0, "[model] " + key + " " + std::to_string(value) +
                                         " does not divide by [parallelism] tp_size " + std::to_string(ranks) +
                                         ": " + why + "; pick sizes that divide");
}

void TextModel::parallelize(std::shared_ptr<Communicator> group, bool sequence_parallel) {
  MPIACCEL_CHECK(group != nullptr && !tp_, name_ + ": tensor_parallelize called twice, or without a group");
  MPIACCEL_CHECK(!cp_, name_ + ": tensor_parallelize after context_parallelize; split by tp first");
  check_divisible(group->size());
  sequence_parallel_ = sequence_parallel;  // the plan's styles follow it
  tp::parallelize_module(module(), group, plan(group->size()));
  join(group);
  tp_ = std::move(group);
}

at::Tensor TextModel::split_head(const at::Tensor& x, const at::Tensor& weight, const SplitContext& ctx) const {
  return at::matmul(ctx.enter(x), weight.t());
}

SplitContext TextModel::split_context(int64_t time) const {
  SplitContext ctx = current_context();
  if (ctx.cp) time = cp::shard_length(time, *ctx.cp);
  MPIACCEL_CHECK(!ctx.sequence_sharded || time % tp_->size() == 0,
                 "[parallelism] sequence_parallel splits the sequence over the " + std::to_string(tp_->size()) +
                     " tensor-parallel ranks, but " + name_ + " has " + std::to_string(time) +
                     " positions here; make [train] seq_len a multiple of tp_size" +
                     (ctx.cp ? " x cp_size" : ""));
  return ctx;
}

SplitContext TextModel::current_context() const {
  const bool split_sequence = !tp::WholeSequence::active();
  return {tp_, tp_ && sequence_parallel_ && split_sequence, split_sequence ? cp_ : nullptr, cp_exchange_};
}

at::Tensor TextModel::attention_positions(int64_t first, int64_t time, const SplitContext& ctx,
                                          const at::TensorOptions& options) const {
  if (!ctx.cp) return at::arange(first, first + time, options.dtype(at::kLong));
  return cp::zigzag_positions(time * ctx.cp->size(), *ctx.cp, options);
}

at::Tensor TextModel::positions_of(int64_t first, int64_t time, const SplitContext& ctx,
                                   const at::TensorOptions& options) const {
  if (!ctx.sequence_sharded) return attention_positions(first, time, ctx, options);
  const int64_t part = time / tp_->size();
  return attention_positions(first, time, ctx, options).narrow(0, tp_->rank() * part, part);
}

void TextModel::context_parallelize(std::shared_ptr<Communicator> group, cp::Exchange exchange) {
  MPIACCEL_CHECK(group != nullptr && !cp_, name_ + ": context_parallelize called twice, or without a group");
  MPIACCEL_CHECK(spec_.dropout == 0.0, "[model] dropout " + std::to_string(spec_.dropout) +
                                           ": context parallelism has no dropout in attention yet; set dropout = 0");
  cp::check_heads(exchange, spec_.n_head / (tp_ ? tp_->size() : 1), group->size());
  cp_exchange_ = exchange;
  cp_ = std::move(group);
}

at::Tensor SplitContext::local_tokens(const at::Tensor& tokens) const {
  return cp ? cp::zigzag_shard(tokens, 1, *cp) : tokens;
}

at::Tensor SplitContext::attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   bool after_cache, double dropout_p) const {
  if (cp) return cp::causal_attention(q, k, v, cp, cp_exchange);
  const int64_t n_rep = q.size(1) / k.size(1);  // grouped-query attention's key/value heads
  return heads_attention(q, cp::detail::repeat_heads(k, n_rep), cp::detail::repeat_heads(v, n_rep), after_cache,
                         dropout_p);
}

at::Tensor SplitContext::enter(const at::Tensor& x) const {
  if (!tp) return x;
  return sequence_sharded ? tp::gather_from_sequence(x, 1, tp) : tp::copy_to_parallel(x, tp);
}

at::Tensor SplitContext::shared(const at::Tensor& param) const {
  return sequence_sharded && param.defined() ? tp::sum_grad_over(param, tp) : param;
}

int64_t TextModel::first_position(const at::Tensor& input, const KvCache* cache) const {
  MPIACCEL_CHECK(input.dim() == 2 && input.scalar_type() == at::kLong,
                 name_ + " input must be int64 tokens [batch, time]");
  const int64_t start = cache ? cache->length() : 0;
  MPIACCEL_CHECK(start + input.size(1) <= spec_.block_size,
                 name_ + " input of " + std::to_string(start + input.size(1)) + " positions is longer than block_size " +
                     std::to_string(spec_.block_size) + " ([train] seq_len)");
  return start;
}

std::pair<at::Tensor, at::Tensor> KvCache::append(size_t layer, const at::Tensor& key, const at::Tensor& value) {
  at::Tensor& k = keys_.at(layer);
  at::Tensor& v = values_.at(layer);
  k = k.defined() ? at::cat({k, key}, 2) : key;
  v = v.defined() ? at::cat({v, value}, 2) : value;
  return {k, v};
}

}  // namespace detail

namespace {

// Restores the training mode generate() found, however it leaves.
class EvalModeScope {
 public:
  explicit EvalModeScope(torch::nn::Module& module)
      : module_(module), was_training_(module.is_training()) {
    module_.eval();
  }
  ~EvalModeScope() { module_.train(was_training_); }
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

int64_t pick_token(at::Tensor logits, const GenerateOptions& options, at::Generator& generator) {
  if (options.temperature <= 0.0) return logits.argmax().item<int64_t>();
  logits = logits / options.temperature;
  if (options.top_k > 0 && options.top_k < logits.size(0)) {
    const at::Tensor kth = std::get<0>(logits.topk(options.top_k)).select(0, options.top_k - 1);
    logits = logits.masked_fill(logits < kth, -std::numeric_limits<double>::infinity());
  }
  const at::Tensor probs = at::softmax(logits, 0);
  return at::multinomial(probs, 1, false, generator).item<int64_t>();
}

// The logits after `context`, feeding the model only what its cache lacks.
// The cache holds context[cache_start ..]; when the window of the last
// context_length() tokens no longer starts there, it starts over from it.
class CachedContext {
 public:
  explicit CachedContext(detail::CausalLm& lm) : lm_(lm), cache_(static_cast<size_t>(lm.layer_count())) {}

  at::Tensor next_logits(const std::vector<int64_t>& context) {
    const int64_t size = static_cast<int64_t>(context.size());
    if (size - cache_start_ > lm_.context_length()) {
      cache_.clear();
      cache_start_ = size - lm_.context_length();
    }
    const int64_t from = cache_start_ + cache_.length();
    const at::Tensor tokens =
        at::tensor(at::ArrayRef<int64_t>(context.data() + from, static_cast<size_t>(size - from)), at::kLong)
            .unsqueeze(0)
            .to(lm_.device());
    return lm_.forward_cached(tokens, cache_).select(1, -1).squeeze(0).to(at::kCPU, at::kFloat);
  }

 private:
  detail::CausalLm& lm_;
  detail::KvCache cache_;
  int64_t cache_start_ = 0;
};

}  // namespace

std::vector<int64_t> generate_tokens(Model& model, const std::vector<int64_t>& prompt,
                                     const GenerateOptions& options) {
  auto* lm = dynamic_cast<detail::CausalLm*>(&model);
  MPIACCEL_CHECK(lm != nullptr, "generate() needs a bundled text model, not a " + model.kind() + " model");
  MPIACCEL_CHECK(options.n_tokens >= 0, "generate(): n_tokens must not be negative");
  MPIACCEL_CHECK(!prompt.empty(), "generate(): the prompt has no token");
  at::NoGradGuard no_grad;
  EvalModeScope eval(model.module());
  // A private generator: sampling neither depends on nor disturbs the
  // training run's random state.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  CachedContext cached(*lm);
  std::vector<int64_t> context = prompt;
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(options.n_tokens));
  for (int64_t n = 0; n < options.n_tokens; ++n) {
    const int64_t token = pick_token(cached.next_logits(context), options, generator);
    context.push_back(token);
    out.push_back(token);
  }
  return out;
}

std::string generate(Model& model, const std::string& prompt, const GenerateOptions& options) {
  std::vector<int64_t> bytes;
  for (unsigned char c : prompt.empty() ? std::string("\n") : prompt) bytes.push_back(c);
  std::string out;
  for (int64_t token : generate_tokens(model, bytes, options)) out.push_back(static_cast<char>(token));
  return out;
}

}  // namespace mpiaccel
