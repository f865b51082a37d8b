// The loop of main.cpp on one process with LibTorch alone (README.md shows
// the difference).
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
struct Waves {
  Waves() : x(torch::randn({4096, 8})), y(torch::sin(0.5 * x.matmul(torch::linspace(-1, 1, 8))).unsqueeze(1)) {}
  int64_t size() const { return x.size(0); }
  std::pair<torch::Tensor, torch::Tensor> get(const std::vector<int64_t>& rows) const {
    auto index = torch::tensor(rows);
    return {x.index_select(0, index), y.index_select(0, index)};
  }
  torch::Tensor x, y;
};

int main() {
  torch::manual_seed(0);
  auto data = std::make_shared<Waves>();
  auto net = std::make_shared<Net>();
  auto opt = std::make_shared<torch::optim::AdamW>(net->parameters(), torch::optim::AdamWOptions(3e-3));
  const int64_t batch_size = 32, steps = 200;
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < batch_size; ++i) rows.push_back(((step - 1) * batch_size + i) % data->size());
    auto [input, target] = data->get(rows);
    auto loss = torch::mse_loss(net->forward(input), target);
    opt->zero_grad();
    loss.backward();
    opt->step();
    std::printf("step %lld loss %.9g\n", static_cast<long long>(step), loss.item<double>());
  }
}
