// The Llama (Touvron et al. 2023; Llama 3's rotary scaling): pre-norm
// decoder layers of RMSNorm, grouped-query attention with rotary position
// embeddings, and a SwiGLU MLP; untied or tied head.
//
// Modules and parameters carry transformers' LlamaForCausalLM names
// ("model.layers.0.self_attn.q_proj.weight", module class
// "LlamaDecoderLayer"), so a Hugging Face checkpoint maps name for name and
// an Accelerate config that wraps LlamaDecoderLayer wraps ours. Each step
// mirrors modeling_llama.py's order of float operations, so logits agree
// with transformers' to float rounding.

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/attention.hpp"
#include "models/causal_lm.hpp"
#include "models/deferred.hpp"
#include "models/families/llama/llama.hpp"
#include "models/families/llama/rope.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/tensor_parallel.hpp"
#include "mpiaccel/unit.hpp"

namespace mpiaccel::detail {
namespace {

std::shared_ptr<tp::Linear> llama_linear(int64_t in, int64_t out, bool bias, const ModelInit& init) {
  return built(std::make_shared<tp::Linear>(in, out, bias), init);
}

}  // namespace

/// Root-mean-square norm: weight · x / sqrt(mean(x²) + eps), computed in float32.
class LlamaRMSNorm : public torch::nn::Module {
 public:
  LlamaRMSNorm(int64_t width, double eps) : torch::nn::Module("LlamaRMSNorm"), eps_(eps) {
    weight = register_parameter("weight", at::ones({width}));
  }

  at::Tensor forward(const at::Tensor& x, const SplitContext& ctx) {
    const at::Tensor h = x.to(at::kFloat);
    const at::Tensor normed = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
    return ctx.shared(weight) * normed.to(x.scalar_type());
  }

  at::Tensor weight;

 private:
  double eps_;
};

/// Rotary grouped-query attention: n_head query heads share n_kv_head key/value heads.
class LlamaAttention : public torch::nn::Module {
 public:
  LlamaAttention(const ModelSpec& spec, const ModelInit& init)
      : torch::nn::Module("LlamaAttention"),
        kv_heads_(spec.kv_heads()), head_dim_(spec.head_width()), dropout_(spec.dropout) {
    const bool bias = spec.attention_bias;
    q_proj_ = register_module("q_proj", llama_linear(spec.n_embd, spec.n_head * head_dim_, bias, init));
    k_proj_ = register_module("k_proj", llama_linear(spec.n_embd, kv_heads_ * head_dim_, bias, init));
    v_proj_ = register_module("v_proj", llama_linear(spec.n_embd, kv_heads_ * head_dim_, bias, init));
    o_proj_ = register_module("o_proj", llama_linear(spec.n_head * head_dim_, spec.n_embd, bias, init));
  }

  /// `cos`, `sin`: the rotary tables of x's positions. With `cache`, x's
  /// positions follow the cached ones and extend them (layer `layer`).
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, KvCache* cache,
                     size_t layer, const SplitContext& ctx) {
    const at::Tensor in = ctx.enter(x);  // the whole sequence
    const int64_t batch = in.size(0), time = in.size(1);
    auto heads = [&](const at::Tensor& t) {
      return t.view({batch, time, t.size(-1) / head_dim_, head_dim_}).transpose(1, 2);
    };
    const at::Tensor q = apply_rotary(heads(q_proj_->forward(in)), cos, sin);
    at::Tensor k = apply_rotary(key_value_heads(*k_proj_, in, heads), cos, sin);
    at::Tensor v = key_value_heads(*v_proj_, in, heads);
    if (cache) std::tie(k, v) = cache->append(layer, k, v);
    const double dropout = is_training() ? dropout_ : 0.0;
    at::Tensor y = ctx.attention(q, k, v, cache != nullptr, dropout);
    return o_proj_->forward(y.transpose(1, 2).reshape({batch, time, q.size(1) * head_dim_}));
  }

  /// Split over `group` (after the plan split q, o, and k, v when they have
  /// heads enough): with fewer key/value heads than ranks, every rank holds
  /// them all and uses the one its query heads share.
  void join(const std::shared_ptr<Communicator>& group) {
    tp_ = group;
    if (kv_heads_ < group->size()) shared_kv_head_ = group->rank() * kv_heads_ / group->size();
  }

 private:
  // The key or value heads this rank's query heads use, [B, kv, T, D].
  template <class Heads>
  at::Tensor key_value_heads(tp::Linear& proj, const at::Tensor& in, const Heads& heads) {
    if (shared_kv_head_ < 0) return heads(proj.forward(in));
    // Each rank's use is part of the whole gradient: summed over the group.
    const at::Tensor bias = proj.bias.defined() ? tp::sum_grad_over(proj.bias, tp_) : at::Tensor();
    const at::Tensor all = heads(at::linear(in, tp::sum_grad_over(proj.weight, tp_), bias));
    return all.narrow(1, shared_kv_head_, 1);
  }

  int64_t kv_heads_, head_dim_;
  double dropout_;
  std::shared_ptr<Communicator> tp_;
  int64_t shared_kv_head_ = -1;  // >= 0: the one kv head of this rank, held whole
  std::shared_ptr<tp::Linear> q_proj_, k_proj_, v_proj_, o_proj_;
};

/// down(silu(gate(x)) · up(x)).
class LlamaMLP : public torch::nn::Module {
 public:
  LlamaMLP(const ModelSpec& spec, const ModelInit& init) : torch::nn::Module("LlamaMLP") {
    const int64_t width = spec.swiglu_width();
    gate_proj_ = register_module("gate_proj", llama_linear(spec.n_embd, width, spec.mlp_bias, init));
    up_proj_ = register_module("up_proj", llama_linear(spec.n_embd, width, spec.mlp_bias, init));
    down_proj_ = register_module("down_proj", llama_linear(width, spec.n_embd, spec.mlp_bias, init));
  }

  at::Tensor forward(const at::Tensor& x, const SplitContext& ctx) {
    const at::Tensor in = ctx.enter(x);
    return down_proj_->forward(at::silu(gate_proj_->forward(in)) * up_proj_->forward(in));
  }

 private:
  std::shared_ptr<tp::Linear> gate_proj_, up_proj_, down_proj_;
};

/// The unit FSDP wraps: x + attn(norm(x)), then x + mlp(norm(x)).
class LlamaDecoderLayer : public torch::nn::Module {
 public:
  LlamaDecoderLayer(const ModelSpec& spec, const ModelInit& init) : torch::nn::Module("LlamaDecoderLayer") {
    self_attn_ = register_module("self_attn", std::make_shared<LlamaAttention>(spec, init));
    mlp_ = register_module("mlp", std::make_shared<LlamaMLP>(spec, init));
    input_layernorm_ = register_module("input_layernorm", norm(spec, init));
    post_attention_layernorm_ = register_module("post_attention_layernorm", norm(spec, init));
  }

  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, KvCache* cache,
                     size_t layer, const SplitContext& ctx) {
    const at::Tensor h =
        x + self_attn_->forward(input_layernorm_->forward(x, ctx), cos, sin, cache, layer, ctx);
    return h + mlp_->forward(post_attention_layernorm_->forward(h, ctx), ctx);
  }

  void join(const std::shared_ptr<Communicator>& group) { self_attn_->join(group); }

  static std::shared_ptr<LlamaRMSNorm> norm(const ModelSpec& spec, const ModelInit& init) {
    return built(std::make_shared<LlamaRMSNorm>(spec.n_embd, spec.rms_norm_eps), init);
  }

 private:
  std::shared_ptr<LlamaAttention> self_attn_;
  std::shared_ptr<LlamaMLP> mlp_;
  std::shared_ptr<LlamaRMSNorm> input_layernorm_, post_attention_layernorm_;
};

/// transformers' LlamaModel: the embedding, the layers and the final norm.
class LlamaModel : public torch::nn::Module {
 public:
  LlamaModel(const ModelSpec& spec, const ModelInit& init) : torch::nn::Module("LlamaModel") {
    embed_tokens =
        register_module("embed_tokens", built(std::make_shared<tp::Embedding>(spec.vocab_size, spec.n_embd), init));
    layers_list = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < spec.n_layer; ++i) {
      layers.push_back(std::make_shared<LlamaDecoderLayer>(spec, init));
      layers_list->push_back(layers.back());
    }
    norm = register_module("norm", LlamaDecoderLayer::norm(spec, init));
  }

  std::shared_ptr<tp::Embedding> embed_tokens;
  torch::nn::ModuleList layers_list{nullptr};
  std::vector<std::shared_ptr<LlamaDecoderLayer>> layers;
  std::shared_ptr<LlamaRMSNorm> norm;
};

class LlamaForCausalLM : public torch::nn::Module, public HasUnits, public TextModel {
 public:
  LlamaForCausalLM(const ModelSpec& spec, const ModelInit& init)
      : torch::nn::Module("LlamaForCausalLM"), TextModel(spec, "Llama"), rope_(spec) {
    model_ = register_module("model", std::make_shared<LlamaModel>(spec, init));
    if (!spec.tie_word_embeddings) lm_head_ = register_module("lm_head", llama_linear(spec.n_embd, spec.vocab_size, false, init));
    if (!init.deferred) init_weights();
  }

  std::string kind() const override { return "llama"; }
  torch::nn::Module& module() override { return *this; }
  at::Device device() const override { return model_->embed_tokens->weight.device(); }

 private:
  at::Tensor run(const at::Tensor& input, KvCache* cache) override {
    const int64_t start = first_position(input, cache);
    const SplitContext ctx = split_context(input.size(1));
    const at::Tensor tokens = ctx.local_tokens(input);  // under context parallelism this rank's shard
    at::Tensor x = model_->embed_tokens->forward(tokens);  // a sequence shard under sequence parallelism
    // Attention sees the whole sequence (of this cp rank): the rotary tables of all its positions.
    const int64_t time = tokens.size(1);
    const Rotary rotary =
        ctx.cp ? rope_.cos_sin_at(attention_positions(start, time, ctx, tokens.options()), x.scalar_type())
               : rope_.cos_sin(start, time, x.device(), x.scalar_type());
    for (size_t i = 0; i < model_->layers.size(); ++i) x = run_layer(i, x, rotary, cache, ctx);
    return head(x, ctx);
  }

  // The pipeline's pieces: the embedding, each layer, the final norm and the
  // head (the embedding again when tied).
  PipelinePieces pipeline_pieces() const override {
    PipelinePieces pieces{{"model.embed_tokens"}, {}, {"model.norm", lm_head_ ? "lm_head" : "model.embed_tokens"}};
    for (size_t i = 0; i < model_->layers.size(); ++i)
      pieces.layers.push_back({"model.layers." + std::to_string(i)});
    return pieces;
  }
  at::Tensor pipeline_first(const at::Tensor& input) override {
    first_position(input, nullptr);  // checks the tokens
    split_context(input.size(1));    // checks a sequence split
    return model_->embed_tokens->forward(input);
  }
  at::Tensor pipeline_layer(int64_t layer, const at::Tensor& hidden) override {
    const SplitContext ctx = current_context();
    const int64_t time = hidden.size(1) * (ctx.sequence_sharded ? tp_->size() : 1);
    const Rotary rotary = rope_.cos_sin(0, time, hidden.device(), hidden.scalar_type());
    return run_layer(static_cast<size_t>(layer), hidden, rotary, nullptr, ctx);
  }
  at::Tensor pipeline_last(const at::Tensor& hidden, const at::Tensor& target) override {
    return loss(head(hidden, current_context()), target);
  }

  using Rotary = std::pair<at::Tensor, at::Tensor>;  // cos, sin

  at::Tensor run_layer(size_t i, const at::Tensor& x, const Rotary& rotary, KvCache* cache, const SplitContext& ctx) {
    LlamaDecoderLayer& layer = *model_->layers[i];
    // By value: activation checkpointing runs this again in backward, after run() returned.
    return units().run(layer, x, [&layer, rotary, cache, i, ctx](const at::Tensor& in) {
      return layer.forward(in, rotary.first, rotary.second, cache, i, ctx);
    });
  }

  at::Tensor head(const at::Tensor& hidden, const SplitContext& ctx) {
    const at::Tensor x = model_->norm->forward(hidden, ctx);
    return lm_head_ ? lm_head_->forward(x) : split_head(x, model_->embed_tokens->weight, ctx);
  }

  // Megatron's split: query heads (key/value heads too when there are as
  // many as ranks), the SwiGLU width, the vocabulary's rows.
  tp::Plan plan(int64_t ranks) const override {
    const std::string layer = "model.layers.*.";
    // Sequence parallelism: the row-parallel outputs and the embedding are
    // reduce-scattered along the sequence, the head's input all-gathered.
    tp::Style rowwise = tp::Style::rowwise(), vocab = tp::Style::vocab_rows(), head = tp::Style::colwise();
    rowwise.sequence_parallel = vocab.sequence_parallel = head.sequence_parallel = sequence_parallel_;
    tp::Plan plan{{layer + "self_attn.q_proj", colwise_in_region()},
                  {layer + "self_attn.o_proj", rowwise},
                  {layer + "mlp.gate_proj", colwise_in_region()},
                  {layer + "mlp.up_proj", colwise_in_region()},
                  {layer + "mlp.down_proj", rowwise},
                  {"model.embed_tokens", vocab}};
    if (spec_.kv_heads() >= ranks) plan.push_back({layer + "self_attn.[kv]_proj", colwise_in_region()});
    if (lm_head_) plan.push_back({"lm_head", head});
    return plan;
  }

  void check_divisible(int64_t ranks) const override {
    check_tp_divides(spec_.n_head, "n_head", ranks, "attention splits by query heads");
    const int64_t kv = spec_.kv_heads();
    MPIACCEL_CHECK(kv % ranks == 0 || ranks % kv == 0,
                   "[model] n_kv_head " + std::to_string(kv) + " and [parallelism] tp_size " + std::to_string(ranks) +
                       ": one must divide the other (key/value heads split over ranks, or each held by " +
                       "tp_size / n_kv_head ranks)");
    check_tp_divides(spec_.swiglu_width(), "intermediate_size", ranks, "the MLP splits by its width");
    check_tp_divides(spec_.vocab_size, "vocab_size", ranks, "the embedding and head split by vocabulary rows");
  }

  void join(const std::shared_ptr<Communicator>& group) override {
    for (const auto& layer : model_->layers) layer->join(group);
  }

  // transformers' LlamaPreTrainedModel._init_weights: N(0, 0.02) for every
  // Linear and the embedding, zero biases, norms at one.
  void init_weights() {
    at::NoGradGuard no_grad;
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      at::Tensor& p = item.value();
      if (name.find("norm") != std::string::npos) continue;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
        p.zero_();
      } else {
        torch::nn::init::normal_(p, 0.0, 0.02);
      }
    }
  }

  RotaryEmbedding rope_;
  std::shared_ptr<LlamaModel> model_;
  std::shared_ptr<tp::Linear> lm_head_;
};

std::shared_ptr<Model> make_llama(const ModelSpec& spec, const ModelInit& init) {
  auto positive = [](int64_t n) { return n >= 1; };
  MPIACCEL_CHECK(positive(spec.n_layer) && positive(spec.n_head) && positive(spec.n_embd) &&
                     positive(spec.vocab_size) && positive(spec.block_size) && positive(spec.head_width()) &&
                     positive(spec.kv_heads()),
                 "Llama sizes must be positive (n_layer, n_head, n_kv_head, n_embd, head_dim, vocab_size, block_size)");
  MPIACCEL_CHECK(spec.head_dim > 0 || spec.n_embd % spec.n_head == 0,
                 "[model] n_embd " + std::to_string(spec.n_embd) + " is not a multiple of n_head " +
                     std::to_string(spec.n_head) + " (or set head_dim)");
  MPIACCEL_CHECK(spec.n_head % spec.kv_heads() == 0,
                 "[model] n_head " + std::to_string(spec.n_head) + " is not a multiple of n_kv_head " +
                     std::to_string(spec.kv_heads()) + ": each key/value head serves a whole group of query heads");
  MPIACCEL_CHECK(spec.rms_norm_eps > 0, "[model] rms_norm_eps must be positive");
  MPIACCEL_CHECK(spec.dropout >= 0.0 && spec.dropout < 1.0,
                 "[model] dropout " + std::to_string(spec.dropout) + " is not in [0, 1)");
  return std::make_shared<LlamaForCausalLM>(spec, init);
}

}  // namespace mpiaccel::detail
