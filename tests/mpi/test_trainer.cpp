// ctest: links mpiaccel; np 1 2 3; timeout 180
// mpiaccel::Trainer's public options on a model of the test's own: a step
// function gives the same training as forward + loss; a user metric is
// reduced over every rank and logged; an optimizer factory is used instead
// of the [optimizer] default; the throughput unit names the metrics key.
#define BOOST_TEST_MODULE trainer
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/trainer.hpp"
#include "support/mpi_test.hpp"
#include "support/shared_dir.hpp"

using namespace mpiaccel;
using mpiaccel::test::SharedDir;
using mpiaccel::test::world;

namespace {

struct Line : torch::nn::Module {
  Line() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  at::Tensor forward(const at::Tensor& x) { return fc->forward(x); }
  torch::nn::Linear fc;
};

// y = x · (1, -2, 3, -4) + 0.5 on 96 fixed points.
class Points : public Dataset {
 public:
  Points() : x_(at::sin(at::arange(384, at::kFloat)).reshape({96, 4})) {
    y_ = x_.matmul(at::tensor({1.0f, -2.0f, 3.0f, -4.0f})).unsqueeze(1) + 0.5;
  }
  int64_t size() const override { return x_.size(0); }
  Batch get(const std::vector<int64_t>& rows) const override {
    auto index = at::tensor(rows, at::kLong);
    return {x_.index_select(0, index), y_.index_select(0, index)};
  }

 private:
  at::Tensor x_, y_;
};

Config job(const std::string& dir, const std::string& tag) {
  Config c;
  c.distributed.strategy = world().size() == 1 ? StrategyChoice::No : StrategyChoice::Ddp;
  c.train.batch_size = 12 / world().size();
  c.train.max_steps = 8;
  c.train.eval_every = 4;
  c.train.eval_batches = 2;
  c.train.log_every = 1;
  c.scheduler.name = LrSchedule::Constant;
  c.scheduler.warmup_steps = 0;
  c.optimizer.lr = 0.05;
  c.checkpoint.dir = dir + "/" + tag;
  c.logging.metrics_file = dir + "/" + tag + ".jsonl";
  c.logging.progress = ProgressMode::Off;
  return c;
}

at::Tensor mse(const at::Tensor& out, const at::Tensor& y) { return (out - y).pow(2).mean(); }

EvalMetric mean_abs_error() {
  return {"val_mae", [](const at::Tensor& out, const Batch& batch) {
            return std::make_pair((out - batch.target).abs().sum().item<double>(),
                                  static_cast<double>(batch.target.numel()));
          }};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

BOOST_AUTO_TEST_CASE(step_loss_trains_like_forward_and_loss_and_metrics_are_reduced) {
  SharedDir dir("trainer");
  auto data = std::make_shared<Points>();
  TrainResult by_loss, by_step;
  {
    Accelerator acc(test::runtime(), job(dir.path, "loss"));
    acc.set_seed(7);
    Trainer trainer(acc, std::make_shared<Line>());
    trainer.loss(mse).train_data(data).eval_data(data).metric(mean_abs_error());
    by_loss = trainer.train();
  }
  {
    Accelerator acc(test::runtime(), job(dir.path, "step"));
    acc.set_seed(7);
    auto model = std::make_shared<Line>();
    Trainer trainer(acc, model);
    trainer
        .step_loss([model](const Batch& batch) {
          Trainer::StepOutput out;
          out.output = model->forward(batch.input);
          out.loss = mse(out.output, batch.target);
          return out;
        })
        .train_data(data)
        .eval_data(data)
        .metric(mean_abs_error());
    by_step = trainer.train();
  }
  MPIACCEL_CHECK_ALL(by_loss.exit_status == kExitFinished && by_loss.steps == 8);
  MPIACCEL_CHECK_ALL(by_loss.losses == by_step.losses);
  MPIACCEL_CHECK_ALL(by_loss.losses.back() < 0.5 * by_loss.losses.front());
  const double mae = by_loss.final_metrics.at("val_mae");
  MPIACCEL_CHECK_ALL(mae > 0 && mae == by_step.final_metrics.at("val_mae"));
  // The metric is the same on every rank: reduced over all of them.
  int64_t bits = 0;
  std::memcpy(&bits, &mae, sizeof bits);
  MPIACCEL_CHECK_ALL(world().all_reduce_int(bits, ReduceOp::Min) == world().all_reduce_int(bits, ReduceOp::Max));
  bool logged = true;
  if (world().rank() == 0) {
    const std::string metrics = read_file(dir.path + "/loss.jsonl");
    logged = metrics.find("\"val_mae\"") != std::string::npos &&
             metrics.find("\"samples_per_s\"") != std::string::npos;
  }
  MPIACCEL_CHECK_ALL(logged);
}

BOOST_AUTO_TEST_CASE(optimizer_factory_replaces_the_default_and_unit_names_the_throughput) {
  SharedDir dir("trainer");
  auto data = std::make_shared<Points>();
  int calls = 0;
  TrainResult sgd, adamw;
  {
    Accelerator acc(test::runtime(), job(dir.path, "sgd"));
    acc.set_seed(7);
    Trainer trainer(acc, std::make_shared<Line>());
    trainer.loss(mse).train_data(data).throughput_unit("points", 1).optimizer_factory(
        [&calls](torch::nn::Module& model) {
          ++calls;
          return std::make_shared<torch::optim::SGD>(model.parameters(), torch::optim::SGDOptions(0.05));
        });
    sgd = trainer.train();
  }
  {
    Accelerator acc(test::runtime(), job(dir.path, "adamw"));
    acc.set_seed(7);
    Trainer trainer(acc, std::make_shared<Line>());
    trainer.loss(mse).train_data(data);
    adamw = trainer.train();
  }
  MPIACCEL_CHECK_ALL(calls == 1);
  MPIACCEL_CHECK_ALL(sgd.losses.front() == adamw.losses.front());  // same model, same first batch
  MPIACCEL_CHECK_ALL(sgd.losses.back() != adamw.losses.back());
  bool keyed = true;
  if (world().rank() == 0) keyed = read_file(dir.path + "/sgd.jsonl").find("\"points_per_s\"") != std::string::npos;
  MPIACCEL_CHECK_ALL(keyed);
}
