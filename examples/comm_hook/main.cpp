// A communication hook of the user's own (docs/ddp.md, "Communication hooks"):
// each rank sends only the k largest of its gradients (top-k sparsification),
// keeps what it did not send and adds it to the next step's gradients (error
// feedback), so nothing is lost, only delayed.
//   mpirun -np 2 ./comm_hook [train.max_steps=200 train.batch_size=16 ...]
#include <mpiaccel/mpiaccel.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

class TopKHook : public mpiaccel::CommHook {
 public:
  explicit TopKHook(double fraction) : fraction_(fraction) {}
  std::string name() const override { return "topk"; }

  mpiaccel::HookWork launch(mpiaccel::GradBucket& bucket) override {
    torch::Tensor& error = errors_[bucket.index];
    if (!error.defined()) error = torch::zeros_like(bucket.buffer);
    error.add_(bucket.buffer);  // this step's gradient plus what earlier steps kept back
    const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(fraction_ * error.numel()));
    auto indices = std::get<1>(error.abs().topk(k));
    auto values = error.index_select(0, indices);
    error.index_fill_(0, indices, 0);  // sent: no longer owed
    const int ranks = bucket.comm->size();
    auto all_indices = torch::empty({ranks * k}, indices.options());
    auto all_values = torch::empty({ranks * k}, values.options());
    auto indices_sent = bucket.comm->all_gather_async(all_indices, indices);
    sent_ += k;
    whole_ += bucket.buffer.numel();
    mpiaccel::HookWork work;
    work.work = bucket.comm->all_gather_async(all_values, values);
    work.finish = [&bucket, indices_sent, all_indices, all_values, ranks] {
      indices_sent->wait();
      bucket.buffer.zero_().index_add_(0, all_indices, all_values).div_(ranks);
    };
    return work;
  }

  int64_t sent() const { return sent_; }
  int64_t whole() const { return whole_; }

 private:
  double fraction_;
  std::map<size_t, torch::Tensor> errors_;
  int64_t sent_ = 0, whole_ = 0;
};

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
  auto hook = std::make_shared<TopKHook>(0.1);
  if (acc.strategy().name() == "ddp") acc.strategy().register_comm_hook(hook);  // before prepare
  acc.prepare(net, opt);
  auto loader = acc.make_loader(data, acc.config().train.batch_size);
  for (int64_t step = 1; step <= acc.config().train.max_steps; ++step) {
    auto [input, target] = loader.next();
    auto loss = torch::mse_loss(net->forward(input), target);
    acc.zero_grad();
    acc.backward(loss);
    acc.step();
    const double mean_loss = acc.mean_across_ranks(loss.item<double>());  // collective: every rank
    if (acc.is_main_process()) std::printf("step %lld loss %.9g\n", static_cast<long long>(step), mean_loss);
  }
  if (acc.is_main_process() && hook->whole() > 0)
    std::printf("top-k hook: sent %lld of %lld gradient numbers per rank\n", static_cast<long long>(hook->sent()),
                static_cast<long long>(hook->whole()));
  return 0;
}); }
