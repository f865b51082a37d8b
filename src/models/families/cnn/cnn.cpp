// The Fashion-MNIST CNN: two conv + pool blocks, a hidden linear layer and
// the head for the 10 classes. Takes normalised images [B, 1, 28, 28].
// LibTorch's default initialisation.

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <vector>

#include "models/deferred.hpp"
#include "models/families/cnn/cnn.hpp"
#include "models/images.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"

namespace mpiaccel::detail {

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

std::shared_ptr<Model> make_cnn(const ModelSpec& spec, const ModelInit& init) {
  check_image_model_spec(spec);
  return std::make_shared<Cnn>(spec, init);
}

}  // namespace mpiaccel::detail
