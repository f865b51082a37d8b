// A user's own classifier and dataset trained by mpiaccel::Trainer: the
// schedule, clipping, accumulation, evaluation, metrics file, checkpoints,
// resume and pre-emption all come from job.ini.
//   mpirun -np 2 ./custom_trainer --config job.ini [section.key=value ...]
// SIGUSR1/SIGTERM to any rank: a checkpoint at the next step, exit status 3;
// run again (checkpoint.resume = latest) to continue where it stopped.
#include <mpiaccel/mpiaccel.hpp>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <vector>

// Points in the plane, labelled by which of three rings they lie on.
class Rings : public mpiaccel::Dataset {
 public:
  Rings(int64_t n, uint64_t seed) {
    auto gen = at::detail::createCPUGenerator(seed);
    auto radius = torch::randint(0, 3, {n}, gen).to(torch::kFloat) + 0.3 * torch::rand({n}, gen);
    auto angle = 2 * M_PI * torch::rand({n}, gen);
    points_ = torch::stack({radius * torch::cos(angle), radius * torch::sin(angle)}, 1);
    labels_ = radius.floor().to(torch::kLong);
  }
  int64_t size() const override { return points_.size(0); }
  mpiaccel::Batch get(const std::vector<int64_t>& rows) const override {
    auto index = torch::tensor(rows);
    return {points_.index_select(0, index), labels_.index_select(0, index)};
  }

 private:
  torch::Tensor points_, labels_;
};

struct Classifier : torch::nn::Module {
  Classifier()
      : body(register_module("body", torch::nn::Sequential(torch::nn::Linear(2, 64), torch::nn::Tanh(),
                                                           torch::nn::Linear(64, 64), torch::nn::Tanh(),
                                                           torch::nn::Linear(64, 3)))) {}
  torch::Tensor forward(const torch::Tensor& x) { return body->forward(x); }
  torch::nn::Sequential body;
};

int main(int argc, char** argv) {
  return mpiaccel::run_main(argc, argv, [](mpiaccel::Accelerator& acc) {
    acc.set_seed(acc.config().distributed.seed);  // the same initial weights on every rank
    mpiaccel::Trainer trainer(acc, std::make_shared<Classifier>());
    trainer.loss([](const torch::Tensor& logits, const torch::Tensor& labels) {
             return torch::cross_entropy_loss(logits, labels);
           })
        .train_data(std::make_shared<Rings>(8192, 1))
        .eval_data(std::make_shared<Rings>(1024, 2))
        .metric(mpiaccel::accuracy_metric());
    return trainer.train().exit_status;
  });
}
