// A user's own transformer-like model under FSDP: a stack of pre-norm
// residual blocks. Two things opt it in (include/mpiaccel/unit.hpp):
//   1. the model derives from mpiaccel::HasUnits;
//   2. it runs each block through units().run, so FSDP gathers the block's
//      parameters just before it runs (and frees them after), and activation
//      checkpointing keeps only the block's input and recomputes it in backward.
// fsdp.ini picks the blocks by class name: transformer_layer_cls_to_wrap = ResidualBlock.
//   mpirun -np 2 ./fsdp_own_model --config fsdp.ini
#include <mpiaccel/mpiaccel.hpp>
#include <torch/torch.h>

#include <memory>
#include <vector>

// One block; its Module name ("ResidualBlock") is what the wrap policy matches.
struct ResidualBlock : torch::nn::Module {
  explicit ResidualBlock(int64_t width)
      : torch::nn::Module("ResidualBlock"),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        up(register_module("up", torch::nn::Linear(width, 4 * width))),
        down(register_module("down", torch::nn::Linear(4 * width, width))) {}
  torch::Tensor forward(const torch::Tensor& x) { return x + down(torch::gelu(up(norm(x)))); }
  torch::nn::LayerNorm norm;
  torch::nn::Linear up, down;
};

struct DeepNet : torch::nn::Module, mpiaccel::HasUnits {
  DeepNet(int64_t in, int64_t width, int64_t depth)
      : embed(register_module("embed", torch::nn::Linear(in, width))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        head(register_module("head", torch::nn::Linear(width, 1))) {
    for (int64_t i = 0; i < depth; ++i) blocks->push_back(std::make_shared<ResidualBlock>(width));
  }
  torch::Tensor forward(const torch::Tensor& input) {
    torch::Tensor x = embed(input);
    for (const auto& block : *blocks) {
      auto* b = block->as<ResidualBlock>();
      x = units().run(*block, x, [b](const torch::Tensor& in) { return b->forward(in); });
    }
    return head(x);
  }
  torch::nn::Linear embed;
  torch::nn::ModuleList blocks;
  torch::nn::Linear head;
};

// y = the sum of the squares of x's first half minus its second half, scaled.
class Quadratic : public mpiaccel::Dataset {
 public:
  Quadratic(int64_t n, uint64_t seed) : x_(torch::randn({n, 16}, at::detail::createCPUGenerator(seed))) {
    auto squares = x_.pow(2);
    y_ = (squares.narrow(1, 0, 8).sum(1, true) - squares.narrow(1, 8, 8).sum(1, true)) / 8;
  }
  int64_t size() const override { return x_.size(0); }
  mpiaccel::Batch get(const std::vector<int64_t>& rows) const override {
    auto index = torch::tensor(rows);
    return {x_.index_select(0, index), y_.index_select(0, index)};
  }

 private:
  torch::Tensor x_, y_;
};

int main(int argc, char** argv) {
  return mpiaccel::run_main(argc, argv, [](mpiaccel::Accelerator& acc) {
    acc.set_seed(acc.config().distributed.seed);
    auto net = std::make_shared<DeepNet>(16, 64, 4);
    mpiaccel::Trainer trainer(acc, net);
    trainer.loss([](const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); })
        .train_data(std::make_shared<Quadratic>(8192, 1))
        .eval_data(std::make_shared<Quadratic>(1024, 2));
    return trainer.train().exit_status;
  });
}
