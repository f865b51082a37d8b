// A user's own model, data and loop, distributed by mpiaccel: the loop of
// single_process.cpp with the changes README.md shows.
//   mpirun -np 2 ./custom_loop [--config job.ini] [train.max_steps=200 train.batch_size=16 ...]
#include <mpiaccel/mpiaccel.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <vector>

struct Net : torch::nn::Module {
  Net() : fc1(register_module("fc1", torch::nn::Linear(8, 64))), fc2(register_module("fc2", torch::nn::Linear(64, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};

// y = sin(x · w / 2) for 4096 fixed random points x.
struct Waves : mpiaccel::Dataset {
  Waves() : x(torch::randn({4096, 8})), y(torch::sin(0.5 * x.matmul(torch::linspace(-1, 1, 8))).unsqueeze(1)) {}
  int64_t size() const { return x.size(0); }
  mpiaccel::Batch get(const std::vector<int64_t>& rows) const override {
    auto index = torch::tensor(rows);
    return {x.index_select(0, index), y.index_select(0, index)};
  }
  torch::Tensor x, y;
};

int main(int argc, char** argv) { return mpiaccel::run_main(argc, argv, [](mpiaccel::Accelerator& acc) {
  torch::manual_seed(0);
  auto data = std::make_shared<Waves>();
  auto net = std::make_shared<Net>();
  auto opt = std::make_shared<mpiaccel::AdamW>(net->parameters(), torch::optim::AdamWOptions(3e-3));
  const int64_t batch_size = acc.config().train.batch_size, steps = acc.config().train.max_steps;
  acc.prepare(net, opt);
  auto loader = acc.make_loader(data, batch_size);
  for (int64_t step = 1; step <= steps; ++step) {
    auto [input, target] = loader.next();
    auto loss = torch::mse_loss(net->forward(input), target);
    acc.zero_grad();
    acc.backward(loss);
    acc.step();
    const double mean_loss = acc.mean_across_ranks(loss.item<double>());  // collective: every rank
    if (acc.is_main_process()) std::printf("step %lld loss %.9g\n", static_cast<long long>(step), mean_loss);
  }
  acc.save_state(steps, loader);
  return 0;
}); }
