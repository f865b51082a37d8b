// The Fashion-MNIST MLP: hidden blocks (Linear + GELU + dropout) that are
// units, so FSDP has more than one to shard, and a head for the 10 classes.
// Takes normalised images [B, 1, 28, 28]. LibTorch's default initialisation.

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <vector>

#include "models/deferred.hpp"
#include "models/families/mlp/mlp.hpp"
#include "models/images.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/unit.hpp"

namespace mpiaccel::detail {

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

std::shared_ptr<Model> make_mlp(const ModelSpec& spec, const ModelInit& init) {
  check_image_model_spec(spec);
  MPIACCEL_CHECK(spec.mlp_layers >= 1, "[model] mlp_layers must be at least 1");
  return std::make_shared<Mlp>(spec, init);
}

}  // namespace mpiaccel::detail
