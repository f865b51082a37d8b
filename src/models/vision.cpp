// The Fashion-MNIST models: an MLP (its hidden blocks are units, so FSDP has
// more than one to shard) and a small CNN (two conv + pool blocks, a hidden
// linear layer and the head). Both take normalised images [B, 1, 28, 28] and
// return logits for the 10 classes. LibTorch's default initialisation.

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <vector>

#include "models/deferred.hpp"
#include "models/families.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/unit.hpp"

namespace mpiaccel::detail {
namespace {

constexpr int64_t kPixels = 28 * 28;
constexpr int64_t kClasses = 10;

void check_images(const at::Tensor& input, const char* model) {
  MPIACCEL_CHECK(input.dim() == 4 && input.size(1) == 1 && input.size(2) == 28 &&
                     input.size(3) == 28 && at::isFloatingType(input.scalar_type()),
                 std::string(model) + " input must be float images [batch, 1, 28, 28]");
}

}  // namespace

/// Linear + GELU: the MLP's unit.
class MlpBlock : public torch::nn::Module {
 public:
  MlpBlock(int64_t in, int64_t out, double dropout, const ModelInit& init)
      : torch::nn::Module("MlpBlock") {
    fc_ = register_module("fc", built(torch::nn::Linear(in, out), init));
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
  }
  at::Tensor forward(const at::Tensor& x) { return dropout_->forward(at::gelu(fc_->forward(x))); }

 private:
  torch::nn::Linear fc_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

class Mlp : public torch::nn::Module, public HasUnits, public Model {
 public:
  Mlp(const ModelSpec& spec, const ModelInit& init) : torch::nn::Module("MLP") {
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    int64_t width = kPixels;
    for (int64_t i = 0; i < spec.mlp_layers; ++i) {
      layers_.push_back(std::make_shared<MlpBlock>(width, spec.hidden_size, spec.dropout, init));
      blocks_->push_back(layers_.back());
      width = spec.hidden_size;
    }
    head_ = register_module("head", built(torch::nn::Linear(width, kClasses), init));
  }

  at::Tensor forward(const at::Tensor& input) override {
    check_images(input, "MLP");
    at::Tensor x = input.flatten(1);
    for (const std::shared_ptr<MlpBlock>& layer : layers_) {
      x = units().run(*layer, x, [&layer](const at::Tensor& in) { return layer->forward(in); });
    }
    return head_->forward(x);
  }
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    return at::cross_entropy_loss(output, target);
  }
  std::string kind() const override { return "mlp"; }
  torch::nn::Module& module() override { return *this; }

 private:
  torch::nn::ModuleList blocks_{nullptr};
  std::vector<std::shared_ptr<MlpBlock>> layers_;
  torch::nn::Linear head_{nullptr};
};

class Cnn : public torch::nn::Module, public Model {
 public:
  Cnn(const ModelSpec& spec, const ModelInit& init) : torch::nn::Module("CNN") {
    using torch::nn::Conv2dOptions;
    conv1_ = register_module("conv1", built(torch::nn::Conv2d(Conv2dOptions(1, 32, 3).padding(1)), init));
    conv2_ = register_module("conv2", built(torch::nn::Conv2d(Conv2dOptions(32, 64, 3).padding(1)), init));
    fc_ = register_module("fc", built(torch::nn::Linear(64 * 7 * 7, spec.hidden_size), init));
    dropout_ = register_module("dropout", torch::nn::Dropout(spec.dropout));
    head_ = register_module("head", built(torch::nn::Linear(spec.hidden_size, kClasses), init));
  }

  at::Tensor forward(const at::Tensor& input) override {
    check_images(input, "CNN");
    at::Tensor x = at::max_pool2d(at::relu(conv1_->forward(input)), {2, 2});  // [B, 32, 14, 14]
    x = at::max_pool2d(at::relu(conv2_->forward(x)), {2, 2});                 // [B, 64, 7, 7]
    x = dropout_->forward(at::relu(fc_->forward(x.flatten(1))));
    return head_->forward(x);
  }
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    return at::cross_entropy_loss(output, target);
  }
  std::string kind() const override { return "cnn"; }
  torch::nn::Module& module() override { return *this; }

 private:
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::Conv2d conv2_{nullptr};
  torch::nn::Linear fc_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Linear head_{nullptr};
};

namespace {

void check_vision_spec(const ModelSpec& spec) {
  MPIACCEL_CHECK(spec.hidden_size >= 1, "[model] hidden_size must be at least 1");
  MPIACCEL_CHECK(spec.dropout >= 0.0 && spec.dropout < 1.0,
                 "[model] dropout " + std::to_string(spec.dropout) + " is not in [0, 1)");
}

}  // namespace

std::shared_ptr<Model> make_mlp(const ModelSpec& spec, const ModelInit& init) {
  check_vision_spec(spec);
  MPIACCEL_CHECK(spec.mlp_layers >= 1, "[model] mlp_layers must be at least 1");
  return std::make_shared<Mlp>(spec, init);
}

std::shared_ptr<Model> make_cnn(const ModelSpec& spec, const ModelInit& init) {
  check_vision_spec(spec);
  return std::make_shared<Cnn>(spec, init);
}

}  // namespace mpiaccel::detail
