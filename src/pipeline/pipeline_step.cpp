// One step through the pipeline (pipeline.hpp): this rank's schedule of
// forwards and backwards over the step's microbatches, the messages between
// stages, and what follows the last backward.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/module.h>

#include <chrono>
#include <map>
#include <optional>

#include "pipeline/pipeline_state.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/tensor_parallel.hpp"
#include "runtime/activity.hpp"
#include "runtime/trace.hpp"

namespace mpiaccel {
namespace {

using Clock = std::chrono::steady_clock;
using Kind = PipelineAction::Kind;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What one (microbatch, stage) keeps from its forward to its backward.
struct Slot {
  at::Tensor input;   // the received activations (a leaf), undefined on the first stage
  at::Tensor output;  // what was sent on, or the loss on the last stage
  std::unique_ptr<tp::DeferredWeightGrads> weights;  // zb_h1: the deferred weight gradients
};

// Runs one step's schedule on this rank.
class StepRun {
 public:
  StepRun(detail::PipelineState& s, std::vector<at::Tensor> inputs, std::vector<at::Tensor> targets, bool training)
      : s_(s), inputs_(std::move(inputs)), targets_(std::move(targets)), training_(training) {}

  void forward(const PipelineAction& a) {
    Slot& slot = slots_[key(a)];
    const auto [begin, end] = s_.cut[static_cast<size_t>(a.stage)];
    const at::Tensor& tokens = inputs_[static_cast<size_t>(a.microbatch)];
    at::Tensor x;
    if (s_.is_first(a.stage)) {
      compute_start();
    } else {
      slot.input = receive(*s_.activations, a.stage - 1, a, tokens.device());
      if (training_) slot.input.requires_grad_(true);
      x = slot.input;
    }
    AutocastGuard autocast(s_.options.device, s_.options.compute_dtype);
    std::optional<tp::DeferredWeightGrads::Recording> recording;
    if (training_ && s_.kind == PipelineScheduleKind::ZeroBubbleH1) {
      slot.weights = std::make_unique<tp::DeferredWeightGrads>();
      recording.emplace(*slot.weights);
    }
    if (s_.is_first(a.stage)) x = s_.model.pipeline_first(tokens);
    for (int64_t l = begin; l < end; ++l) x = s_.model.pipeline_layer(l, x);
    if (s_.is_last(a.stage)) {
      slot.output = s_.model.pipeline_last(x, targets_[static_cast<size_t>(a.microbatch)]);
      loss_sum_ = loss_sum_.defined() ? loss_sum_ + slot.output.detach() : slot.output.detach();
    } else {
      s_.activations->send(x, s_.rank_of(a.stage + 1), tag(a), between(a.stage, a.stage + 1, a));
      slot.output = x;
    }
    if (!training_) slots_.erase(key(a));
    compute_end();
  }

  // The input gradient (and, unless deferred, the weights') of `a`.
  void backward(const PipelineAction& a) {
    Slot& slot = slots_.at(key(a));
    if (s_.is_last(a.stage)) {
      compute_start();
      const double per_microbatch = 1.0 / static_cast<double>(inputs_.size());
      const at::Tensor loss = slot.output * per_microbatch;
      (s_.options.scaler ? s_.options.scaler->scale(loss) : loss).backward();
    } else {
      const at::Tensor grad = receive(*s_.gradients, a.stage + 1, a, slot.output.device());
      torch::autograd::backward({slot.output}, {grad});
    }
    if (!s_.is_first(a.stage))
      s_.gradients->send(slot.input.grad(), s_.rank_of(a.stage - 1), tag(a, -1), between(a.stage, a.stage - 1, a));
    if (!slot.weights) slots_.erase(key(a));
    else slot.input = slot.output = at::Tensor();
    compute_end();
  }

  void weight_gradients(const PipelineAction& a) {
    compute_start();
    auto found = slots_.find(key(a));
    MPIACCEL_CHECK(found != slots_.end() && found->second.weights,
                   "pipeline: a weight-gradient pass before its input-gradient pass (" + describe(a) + ")");
    found->second.weights->apply();
    slots_.erase(found);
    compute_end();
  }

  double loss_sum() const { return loss_sum_.defined() ? loss_sum_.item<double>() : 0.0; }
  double compute_s() const { return compute_s_; }

  std::string describe(const PipelineAction& a) const {
    static const char* names[] = {"forward", "backward", "input-gradient pass", "weight-gradient pass"};
    return std::string(names[static_cast<int>(a.kind)]) + " of microbatch " + std::to_string(a.microbatch) + " at " +
           s_.stage_name(a.stage);
  }

 private:
  int64_t key(const PipelineAction& a) const { return a.microbatch * s_.stage_count + a.stage; }
  // The tag of the message between a.stage and a.stage + 1 (offset -1: a.stage - 1 and a.stage).
  int64_t tag(const PipelineAction& a, int64_t offset = 0) const {
    return a.microbatch * s_.stage_count + a.stage + offset;
  }
  std::string between(int64_t from, int64_t to, const PipelineAction& a) const {
    return "of microbatch " + std::to_string(a.microbatch) + " from " + s_.stage_name(from) + " to " + s_.stage_name(to);
  }
  at::Tensor receive(detail::StageMessages& channel, int64_t from, const PipelineAction& a, const at::Device& device) {
    const int64_t lower = std::min(from, a.stage);
    PipelineAction link = a;
    link.stage = lower;
    at::Tensor t = channel.receive(s_.rank_of(from), tag(link), between(from, a.stage, a), device);
    compute_start();
    return t;
  }
  void compute_start() { started_ = Clock::now(); }
  void compute_end() { compute_s_ += seconds(Clock::now() - started_); }

  detail::PipelineState& s_;
  std::vector<at::Tensor> inputs_, targets_;
  bool training_;
  std::map<int64_t, Slot> slots_;
  at::Tensor loss_sum_;
  Clock::time_point started_ = Clock::now();
  double compute_s_ = 0;
};

std::vector<at::Tensor> microbatches_of(const at::Tensor& batch, int64_t count, const char* what) {
  MPIACCEL_CHECK(batch.dim() >= 1 && batch.size(0) % count == 0,
                 std::string("pipeline parallelism: the step's ") + what + " has " +
                     std::to_string(batch.dim() ? batch.size(0) : 0) + " rows, which do not divide into " + std::to_string(count) +
                     " microbatches; make batch_size × grad_accum_steps a multiple of pp_microbatches");
  return batch.chunk(count, 0);
}

}  // namespace

double Pipeline::train_step(const at::Tensor& input, const at::Tensor& target) {
  detail::PipelineState& s = *impl_;
  const Clock::time_point start = Clock::now();
  StepRun run(s, microbatches_of(input, s.microbatches, "input"), microbatches_of(target, s.microbatches, "target"),
              true);
  const std::vector<PipelineAction> actions = pipeline_schedule(s.kind, s.rank, s.ranks, s.virtual_stages, s.microbatches);
  Strategy& strategy = *s.options.strategy;
  // The rank's last backward reduces the step's gradients over the
  // data-parallel group (those it does not reach, like any accumulated
  // gradient, are reduced when it ends); the others accumulate.
  size_t last_backward = 0;
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i].kind != Kind::Forward) last_backward = i;
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    detail::set_activity("pipeline " + run.describe(a));
    if (a.kind == Kind::Forward) {
      detail::TraceScope span("forward");
      run.forward(a);
      continue;
    }
    detail::TraceScope span("backward");
    strategy.set_gradient_sync(i == last_backward);
    if (a.kind == Kind::BackwardWeight) run.weight_gradients(a);
    else run.backward(a);
    strategy.after_backward();
  }
  s.activations->finish_sends();
  s.gradients->finish_sends();
  // A tied parameter's stages each hold part of its gradient.
  for (const at::Tensor& p : s.tied_params)
    if (p.grad().defined()) s.tied->all_reduce(p.grad(), ReduceOp::Sum);
  const bool last_here = s.rank_of(s.stage_count - 1) == s.rank;
  const double loss = s.pp->all_reduce_scalar(last_here ? run.loss_sum() : 0.0, ReduceOp::Sum);
  s.timing = {seconds(Clock::now() - start), run.compute_s()};
  return loss / static_cast<double>(s.microbatches);
}

double Pipeline::eval_loss(const at::Tensor& input, const at::Tensor& target) {
  detail::PipelineState& s = *impl_;
  StepRun run(s, {input}, {target}, false);
  // One microbatch through this rank's stages, in order.
  for (int64_t stage : s.stages) run.forward({Kind::Forward, 0, stage});
  s.activations->finish_sends();
  const bool last_here = s.rank_of(s.stage_count - 1) == s.rank;
  return s.pp->all_reduce_scalar(last_here ? run.loss_sum() : 0.0, ReduceOp::Sum);
}

}  // namespace mpiaccel
