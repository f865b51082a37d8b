// A user's own model split by tensor parallelism, in two steps:
//   1. the model writes mpiaccel::tp::Linear where it would write
//      torch::nn::Linear (the same layer until a plan splits it: LibTorch
//      modules have no forward hooks, so a stock Linear cannot be made to
//      communicate from outside);
//   2. its ParallelPlan's tensor step splits its layers by module-name
//      pattern, as PyTorch's parallelize_module does with ColwiseParallel and
//      RowwiseParallel: each block's `up` by output rows, its `down` by input
//      columns, so a block costs one all-reduce forward and one backward.
//      mpiaccel::parallelize (called by the Trainer) runs it before the
//      data-parallel strategy takes the model.
// tp.ini asks for [parallelism] tp_size = 2; the data-parallel ranks (the
// world size / 2) split the data.
//   mpirun -np 2 ./tp_own_model --config tp.ini
//   mpirun -np 4 ./tp_own_model --config tp.ini distributed.strategy=fsdp
#include <mpiaccel/mpiaccel.hpp>
#include <torch/torch.h>

#include <memory>
#include <vector>

namespace tp = mpiaccel::tp;

// A pre-norm residual MLP block. Its Module name is what FSDP's wrap policy
// matches when the job also shards.
struct ResidualBlock : torch::nn::Module {
  explicit ResidualBlock(int64_t width)
      : torch::nn::Module("ResidualBlock"),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        up(register_module("up", std::make_shared<tp::Linear>(width, 4 * width))),
        down(register_module("down", std::make_shared<tp::Linear>(4 * width, width))) {}
  torch::Tensor forward(const torch::Tensor& x) { return x + down->forward(torch::gelu(up->forward(norm(x)))); }
  torch::nn::LayerNorm norm;
  std::shared_ptr<tp::Linear> up, down;
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
    auto net = std::make_shared<DeepNet>(16, 64, 4);  // whole, the same on every rank
    // How the model splits: parallelize() (through the Trainer) applies it
    // when [parallelism] tp_size > 1, before the strategy takes the model.
    mpiaccel::ParallelPlan plan;
    plan.tensor = [&acc, net](std::shared_ptr<mpiaccel::Communicator> group) {
      const auto split = tp::parallelize_module(*net, group,
                                                {{"blocks.*.up", tp::Style::colwise()},
                                                 {"blocks.*.down", tp::Style::rowwise()}});
      acc.print("tensor parallelism: " + std::to_string(split.size()) + " layers split over " +
                std::to_string(group->size()) + " ranks");
    };
    mpiaccel::Trainer trainer(acc, net);
    trainer.parallel_plan(plan)
        .loss([](const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); })
        .train_data(std::make_shared<Quadratic>(8192, 1))
        .eval_data(std::make_shared<Quadratic>(1024, 2));
    return trainer.train().exit_status;
  });
}
