// A user's own model cut into pipeline stages. LibTorch has no tracer to cut
// an arbitrary forward, so the model declares its pieces
// (mpiaccel::PipelineModel): a first function (here the input projection),
// its layers (the residual blocks) and a last function (the head and the
// loss), each naming the modules it uses. The plan's pipeline step
// (mpiaccel::parallelize, called by the Trainer) keeps this rank's stages;
// the Trainer then runs each step through the schedule of pp.ini
// ([parallelism] pp_size = 2, 1f1b over 4 microbatches).
//   mpirun -np 2 ./pp_own_model --config pp.ini
//   mpirun -np 4 ./pp_own_model --config pp.ini          (pp 2 × 2 data-parallel ranks)
#include <mpiaccel/mpiaccel.hpp>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

// A pre-norm residual MLP block (tp::Linear: a zb_h1 schedule defers its
// weight gradients to fill the pipeline's bubble).
struct ResidualBlock : torch::nn::Module {
  explicit ResidualBlock(int64_t width)
      : torch::nn::Module("ResidualBlock"),
        norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        up(register_module("up", std::make_shared<mpiaccel::tp::Linear>(width, 4 * width))),
        down(register_module("down", std::make_shared<mpiaccel::tp::Linear>(4 * width, width))) {}
  torch::Tensor forward(const torch::Tensor& x) { return x + down->forward(torch::gelu(up->forward(norm(x)))); }
  torch::nn::LayerNorm norm;
  std::shared_ptr<mpiaccel::tp::Linear> up, down;
};

struct DeepNet : torch::nn::Module, mpiaccel::HasUnits, mpiaccel::PipelineModel {
  DeepNet(int64_t in, int64_t width, int64_t depth)
      : embed(register_module("embed", torch::nn::Linear(in, width))),
        blocks(register_module("blocks", torch::nn::ModuleList())),
        head(register_module("head", torch::nn::Linear(width, 1))) {
    for (int64_t i = 0; i < depth; ++i) blocks->push_back(std::make_shared<ResidualBlock>(width));
  }

  // The whole model (one process, or evaluation without a pipeline).
  torch::Tensor forward(const torch::Tensor& input) {
    torch::Tensor x = pipeline_first(input);
    for (size_t i = 0; i < blocks->size(); ++i) x = pipeline_layer(static_cast<int64_t>(i), x);
    return head(x);
  }

  // The pieces, by the modules' registered paths.
  mpiaccel::PipelinePieces pipeline_pieces() const override {
    mpiaccel::PipelinePieces pieces{{"embed"}, {}, {"head"}};
    for (size_t i = 0; i < blocks->size(); ++i) pieces.layers.push_back({"blocks." + std::to_string(i)});
    return pieces;
  }
  torch::Tensor pipeline_first(const torch::Tensor& input) override { return embed(input); }
  torch::Tensor pipeline_layer(int64_t layer, const torch::Tensor& x) override {
    auto* block = (*blocks)[static_cast<size_t>(layer)]->as<ResidualBlock>();
    return units().run(*block, x, [block](const torch::Tensor& in) { return block->forward(in); });
  }
  torch::Tensor pipeline_last(const torch::Tensor& x, const torch::Tensor& target) override {
    return torch::mse_loss(head(x), target);
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
    // Its pipeline pieces: parallelize() (through the Trainer) keeps this
    // rank's stages when [parallelism] pp_size > 1.
    mpiaccel::ParallelPlan plan;
    plan.pipeline = net.get();
    mpiaccel::Trainer trainer(acc, net);
    trainer.parallel_plan(plan)
        .loss([](const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); })
        .train_data(std::make_shared<Quadratic>(8192, 1))
        .eval_data(std::make_shared<Quadratic>(1024, 2));
    return trainer.train().exit_status;
  });
}
