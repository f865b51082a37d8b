// A GPT-2-style decoder for byte-level text (after karpathy/nanoGPT):
// token + position embeddings, n_layer pre-LN DecoderLayers, a final
// LayerNorm and a head tied to the token embedding.
//
// Module names matter here: FSDP's TRANSFORMER_BASED_WRAP picks units by
// Module::name() ("DecoderLayer"), and parameter names ("blocks.0.attn.qkv.
// weight") are the keys of checkpoints and of the DDP cross-rank check.

#include <ATen/core/grad_mode.h>
#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "models/attention.hpp"
#include "models/causal_lm.hpp"
#include "models/deferred.hpp"
#include "models/families/gpt/gpt.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/tensor_parallel.hpp"
#include "mpiaccel/unit.hpp"

namespace mpiaccel::detail {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

torch::nn::LayerNorm layer_norm(int64_t width) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}));
}

// A LayerNorm of the residual stream; on a sequence shard its parameters'
// gradients are summed over the group.
at::Tensor normed(torch::nn::LayerNorm& norm, const at::Tensor& x, const SplitContext& ctx) {
  if (!ctx.sequence_sharded) return norm->forward(x);
  const auto& o = norm->options;
  return at::layer_norm(x, o.normalized_shape(), ctx.shared(norm->weight), ctx.shared(norm->bias), o.eps());
}

std::shared_ptr<tp::Linear> gpt_linear(int64_t in, int64_t out, const ModelInit& init) {
  return built(std::make_shared<tp::Linear>(in, out), init);
}

}  // namespace

class CausalSelfAttention : public torch::nn::Module {
 public:
  CausalSelfAttention(const ModelSpec& spec, const ModelInit& init)
      : torch::nn::Module("CausalSelfAttention"), head_dim_(spec.n_embd / spec.n_head) {
    // One fused projection for q, k and v: one matmul instead of three.
    // Split over a tensor-parallel group, each rank holds its heads' rows of
    // each of the three blocks (Style::fused_blocks).
    qkv_ = register_module("qkv", gpt_linear(spec.n_embd, 3 * spec.n_embd, init));
    proj_ = register_module("proj", gpt_linear(spec.n_embd, spec.n_embd, init));
    attn_dropout_ = register_module("attn_dropout", torch::nn::Dropout(spec.dropout));
    resid_dropout_ = register_module("resid_dropout", torch::nn::Dropout(spec.dropout));
  }

  /// With `cache`, x's positions follow the cached ones and extend them (layer `layer`).
  at::Tensor forward(const at::Tensor& x, KvCache* cache, size_t layer, const SplitContext& ctx) {
    const at::Tensor in = ctx.enter(x);  // the whole sequence
    const int64_t batch = in.size(0);
    const int64_t time = in.size(1);
    const int64_t width = qkv_->out_features() / 3;  // this rank's heads' width
    std::vector<at::Tensor> qkv = qkv_->forward(in).split(width, 2);
    auto heads = [&](const at::Tensor& t) {
      return t.view({batch, time, width / head_dim_, head_dim_}).transpose(1, 2);  // [B, nh, T, hd]
    };
    at::Tensor q = heads(qkv[0]);
    at::Tensor k = heads(qkv[1]);
    at::Tensor v = heads(qkv[2]);
    if (cache) std::tie(k, v) = cache->append(layer, k, v);
    const double dropout = is_training() ? attn_dropout_->options.p() : 0.0;
    at::Tensor y = ctx.attention(q, k, v, cache != nullptr, dropout);
    y = y.transpose(1, 2).contiguous().view({batch, time, width});
    return ctx.dropout(resid_dropout_, proj_->forward(y));
  }

 private:
  int64_t head_dim_;
  std::shared_ptr<tp::Linear> qkv_;
  std::shared_ptr<tp::Linear> proj_;
  torch::nn::Dropout attn_dropout_{nullptr};
  torch::nn::Dropout resid_dropout_{nullptr};
};

class FeedForward : public torch::nn::Module {
 public:
  FeedForward(const ModelSpec& spec, const ModelInit& init)
      : torch::nn::Module("FeedForward"), approximate_(spec.activation == Activation::GeluTanh ? "tanh" : "none") {
    fc_ = register_module("fc", gpt_linear(spec.n_embd, 4 * spec.n_embd, init));
    proj_ = register_module("proj", gpt_linear(4 * spec.n_embd, spec.n_embd, init));
    dropout_ = register_module("dropout", torch::nn::Dropout(spec.dropout));
  }

  at::Tensor forward(const at::Tensor& x, const SplitContext& ctx) {
    return ctx.dropout(dropout_, proj_->forward(at::gelu(fc_->forward(ctx.enter(x)), approximate_)));
  }

 private:
  std::string approximate_;  // at::gelu's: "none" (exact) or "tanh"
  std::shared_ptr<tp::Linear> fc_;
  std::shared_ptr<tp::Linear> proj_;
  torch::nn::Dropout dropout_{nullptr};
};

/// One transformer block, the unit FSDP wraps: x + attn(ln(x)), then x + mlp(ln(x)).
class DecoderLayer : public torch::nn::Module {
 public:
  DecoderLayer(const ModelSpec& spec, const ModelInit& init) : torch::nn::Module("DecoderLayer") {
    ln_1_ = register_module("ln_1", built(layer_norm(spec.n_embd), init));
    attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(spec, init));
    ln_2_ = register_module("ln_2", built(layer_norm(spec.n_embd), init));
    mlp_ = register_module("mlp", std::make_shared<FeedForward>(spec, init));
  }

  at::Tensor forward(const at::Tensor& x, KvCache* cache, size_t layer, const SplitContext& ctx) {
    at::Tensor h = x + attn_->forward(normed(ln_1_, x, ctx), cache, layer, ctx);
    return h + mlp_->forward(normed(ln_2_, h, ctx), ctx);
  }

 private:
  torch::nn::LayerNorm ln_1_{nullptr};
  std::shared_ptr<CausalSelfAttention> attn_;
  torch::nn::LayerNorm ln_2_{nullptr};
  std::shared_ptr<FeedForward> mlp_;
};

class Gpt : public torch::nn::Module, public HasUnits, public TextModel {
 public:
  Gpt(const ModelSpec& spec, const ModelInit& init) : torch::nn::Module("GPT"), TextModel(spec, "GPT") {
    wte_ = register_module("wte", built(std::make_shared<tp::Embedding>(spec.vocab_size, spec.n_embd), init));
    wpe_ = register_module("wpe", built(torch::nn::Embedding(spec.block_size, spec.n_embd), init));
    dropout_ = register_module("dropout", torch::nn::Dropout(spec.dropout));
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < spec.n_layer; ++i) {
      layers_.push_back(std::make_shared<DecoderLayer>(spec, init));
      blocks_->push_back(layers_.back());
    }
    ln_f_ = register_module("ln_f", built(layer_norm(spec.n_embd), init));
    // Deferred parameters get their values from elsewhere (rank 0's).
    if (!init.deferred) init_weights();
  }

  std::string kind() const override { return "gpt"; }
  torch::nn::Module& module() override { return *this; }
  at::Device device() const override { return wte_->weight.device(); }

 private:
  at::Tensor run(const at::Tensor& input, KvCache* cache) override {
    const int64_t start = first_position(input, cache);
    const SplitContext ctx = split_context(input.size(1));
    at::Tensor x = embed(ctx.local_tokens(input), start, ctx);
    for (size_t i = 0; i < layers_.size(); ++i) x = run_layer(i, x, cache, ctx);
    return head(x, ctx);
  }

  // The pipeline's pieces: the embeddings, each block, the final norm and
  // the head tied to the token embedding (so wte is on the first and the
  // last stage).
  PipelinePieces pipeline_pieces() const override {
    PipelinePieces pieces{{"wte", "wpe"}, {}, {"ln_f", "wte"}};
    for (size_t i = 0; i < layers_.size(); ++i) pieces.layers.push_back({"blocks." + std::to_string(i)});
    return pieces;
  }
  at::Tensor pipeline_first(const at::Tensor& input) override {
    return embed(input, first_position(input, nullptr), split_context(input.size(1)));
  }
  at::Tensor pipeline_layer(int64_t layer, const at::Tensor& hidden) override {
    return run_layer(static_cast<size_t>(layer), hidden, nullptr, current_context());
  }
  at::Tensor pipeline_last(const at::Tensor& hidden, const at::Tensor& target) override {
    return loss(head(hidden, current_context()), target);
  }

  // Token and position embeddings of `input` (positions from `start`; under
  // context parallelism this rank's tokens at their global positions).
  at::Tensor embed(const at::Tensor& input, int64_t start, const SplitContext& ctx) {
    // On a sequence shard: this rank's positions, each rank's use of the
    // position table a part of its gradient.
    const at::Tensor positions = positions_of(start, input.size(1), ctx, input.options());
    const at::Tensor x0 = wte_->forward(input) + at::embedding(ctx.shared(wpe_->weight), positions);
    return ctx.dropout(dropout_, x0);
  }

  at::Tensor run_layer(size_t i, const at::Tensor& x, KvCache* cache, const SplitContext& ctx) {
    DecoderLayer& layer = *layers_[i];
    return units().run(layer, x, [&layer, cache, i, ctx](const at::Tensor& in) { return layer.forward(in, cache, i, ctx); });
  }

  at::Tensor head(const at::Tensor& hidden, const SplitContext& ctx) {
    // Tied head: the token embedding read backwards, one parameter for both
    // (split: this rank's vocabulary rows, its slice of the logits).
    return split_head(normed(ln_f_, hidden, ctx), wte_->weight, ctx);
  }

  // Megatron's split: heads (the fused q, k, v by blocks), the MLP's width,
  // the vocabulary's rows (embedding and tied head).
  tp::Plan plan(int64_t) const override {
    tp::Style qkv = colwise_in_region();
    qkv.fused_blocks = 3;
    // Sequence parallelism: the row-parallel outputs and the embedding are
    // reduce-scattered along the sequence instead of all-reduced.
    tp::Style rowwise = tp::Style::rowwise(), vocab = tp::Style::vocab_rows();
    rowwise.sequence_parallel = vocab.sequence_parallel = sequence_parallel_;
    return {{"blocks.*.attn.qkv", qkv},
            {"blocks.*.attn.proj", rowwise},
            {"blocks.*.mlp.fc", colwise_in_region()},
            {"blocks.*.mlp.proj", rowwise},
            {"wte", vocab}};
  }

  void check_divisible(int64_t ranks) const override {
    check_tp_divides(spec_.n_head, "n_head", ranks, "attention splits by heads");
    check_tp_divides(spec_.vocab_size, "vocab_size", ranks, "the embedding and head split by vocabulary rows");
  }

  void join(const std::shared_ptr<Communicator>&) override {}

  // nanoGPT's GPT-2 initialisation: N(0, 0.02) weights and zero biases, with
  // the projections back into the residual stream scaled by 1/sqrt(2·n_layer)
  // so the residual's variance does not grow with depth.
  void init_weights() {
    at::NoGradGuard no_grad;
    const double residual_std = 0.02 / std::sqrt(2.0 * double(spec_.n_layer));
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      at::Tensor& p = item.value();
      if (name.find("ln_") != std::string::npos) continue;  // LayerNorm: ones and zeros
      if (ends_with(name, ".bias")) {
        p.zero_();
      } else if (ends_with(name, "proj.weight")) {
        // nn::init, not Tensor::normal_: the same draw, and GCC does not warn
        // (-Wmaybe-uninitialized, falsely) about its defaulted generator.
        torch::nn::init::normal_(p, 0.0, residual_std);
      } else {
        torch::nn::init::normal_(p, 0.0, 0.02);
      }
    }
  }

  std::shared_ptr<tp::Embedding> wte_;
  torch::nn::Embedding wpe_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  std::vector<std::shared_ptr<DecoderLayer>> layers_;
  torch::nn::LayerNorm ln_f_{nullptr};
};

std::shared_ptr<Model> make_gpt(const ModelSpec& spec, const ModelInit& init) {
  MPIACCEL_CHECK(spec.n_layer >= 1 && spec.n_head >= 1 && spec.n_embd >= 1 &&
                     spec.vocab_size >= 1 && spec.block_size >= 1,
                 "GPT sizes must be positive (n_layer, n_head, n_embd, vocab_size, block_size)");
  MPIACCEL_CHECK(spec.n_embd % spec.n_head == 0, "[model] n_embd " + std::to_string(spec.n_embd) +
                                                     " is not a multiple of n_head " +
                                                     std::to_string(spec.n_head));
  MPIACCEL_CHECK(spec.dropout >= 0.0 && spec.dropout < 1.0,
                 "[model] dropout " + std::to_string(spec.dropout) + " is not in [0, 1)");
  return std::make_shared<Gpt>(spec, init);
}

}  // namespace mpiaccel::detail
