// ctest: links mpiaccel; np 1 2 3 4; timeout 300
// DDP communication hooks (mpiaccel/comm_hook.hpp, docs/ddp.md):
// - PowerSGD and batched PowerSGD, driven bucket by bucket over real MPI
//   ranks, reproduce a reference computed here in float64 from every rank's
//   gradients (P = ΣMQ, Gram-Schmidt, Q = ΣMᵀP̂ / n, M̂ = P̂Qᵀ, the error
//   e = M − M̂ carried into the next step, Q kept for the next): output,
//   error feedback and warm start, over three steps;
// - before start_iter PowerSGD is the plain all-reduce, bit for bit;
// - the hooks that should be exact are: a hook of the user's own that wraps
//   the all-reduce, PowerSGD before its start, and comm_hook = bf16 against
//   reduce_dtype = bf16 all train the GPT to the same bits as plain DDP.

#define BOOST_TEST_MODULE comm_hooks
#include "support/mpi_test.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm_hooks/powersgd_hook.hpp"
#include "ddp/ddp_strategy.hpp"
#include "mpiaccel/comm_hook.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/precision.hpp"

using namespace mpiaccel;
using mpiaccel::test::world;
using mpiaccel::test::world_ptr;

namespace {

// Four gradients in two buckets: a [16, 12] matrix worth compressing at rank
// 2, a bias, an [8, 3, 2] tensor too small to gain ((8 + 6)·2·2 > 48), and a
// [10, 20] matrix alone in the last bucket.
const std::vector<std::vector<int64_t>> kShapes = {{16, 12}, {5}, {8, 3, 2}, {10, 20}};
const std::vector<std::vector<size_t>> kBuckets = {{0, 1, 2}, {3}};

at::Tensor local_gradient(int rank, int step, size_t param) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(1000 * step + 10 * rank + param);
  return at::randn(kShapes[param], generator, at::TensorOptions().dtype(at::kFloat));
}

std::vector<at::Tensor> parameters() {
  std::vector<at::Tensor> params;
  for (const auto& shape : kShapes) params.push_back(at::zeros(shape));
  return params;
}

std::vector<std::string> names() { return {"a.weight", "a.bias", "conv.weight", "b.weight"}; }

// One synchronized step through `hook`: every bucket launched in order, then
// finished in order, as the reducer does. Returns each parameter's result.
std::vector<at::Tensor> hook_step(CommHook& hook, int step) {
  std::vector<GradBucket> buckets(kBuckets.size());
  std::vector<HookWork> works;
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    GradBucket& bucket = buckets[b];
    std::vector<at::Tensor> flat;
    for (size_t i : kBuckets[b]) flat.push_back(local_gradient(world().rank(), step, i).view({-1}));
    bucket.buffer = at::cat(flat);
    int64_t offset = 0;
    for (size_t i : kBuckets[b]) {
      const at::Tensor view = bucket.buffer.narrow(0, offset, local_gradient(0, 0, i).numel()).view(kShapes[i]);
      bucket.gradients.push_back(view);
      offset += view.numel();
    }
    bucket.index = b;
    bucket.last = b + 1 == kBuckets.size();
    bucket.params = kBuckets[b];
    bucket.comm = &world();
    works.push_back(hook.launch(bucket));
  }
  std::vector<at::Tensor> out(kShapes.size());
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    if (works[b].work) works[b].work->wait();
    if (works[b].finish) works[b].finish();
    for (size_t s = 0; s < kBuckets[b].size(); ++s) out[kBuckets[b][s]] = buckets[b].gradients[s].clone();
  }
  return out;
}

at::Tensor orthogonalized(at::Tensor m) {
  for (int64_t i = 0; i < m.size(1); ++i) {
    at::Tensor col = m.narrow(1, i, 1);
    const double norm = col.norm().item<double>();
    if (norm > 0) col.div_(norm);
    if (i + 1 < m.size(1)) {
      at::Tensor rest = m.narrow(1, i + 1, m.size(1) - i - 1);
      rest.sub_((col * rest).sum(0, true) * col);
    }
  }
  return m;
}

// PowerSGD of one matrix in float64: every rank's M (errors added) and the
// shared Q in; the approximation out, Q replaced, errors updated.
at::Tensor reference_compress(std::vector<at::Tensor>& ms, at::Tensor& q, std::vector<at::Tensor>& errors) {
  const int n = static_cast<int>(ms.size());
  at::Tensor p = at::zeros({ms[0].size(0), q.size(1)}, at::kDouble);
  for (const at::Tensor& m : ms) p += m.mm(q);
  p = orthogonalized(p);
  at::Tensor new_q = at::zeros_like(q);
  for (const at::Tensor& m : ms) new_q += m.t().mm(p);
  q = new_q / n;
  const at::Tensor approx = p.mm(q.t());
  for (int r = 0; r < n; ++r) errors[r] = ms[r] - approx;
  return approx;
}

double relative(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kDouble) - want).norm().item<double>() / std::max(want.norm().item<double>(), 1e-12);
}

PowerSgdOptions powersgd(bool batched) {
  PowerSgdOptions options;
  options.rank = 2;
  options.start_iter = 0;
  options.batched = batched;
  return options;
}

}  // namespace

BOOST_AUTO_TEST_CASE(powersgd_matches_a_reference_step_by_step) {
  at::set_num_threads(1);
  const int n = world().size(), me = world().rank();
  mpiaccel::detail::PowerSgdHook hook(powersgd(false));
  hook.attach(parameters(), names(), world());
  BOOST_TEST(!hook.warm_start_q(2).defined());  // too small to gain: sent whole
  std::map<size_t, at::Tensor> q = {{0, hook.warm_start_q(0).to(at::kDouble)}, {3, hook.warm_start_q(3).to(at::kDouble)}};
  std::map<size_t, std::vector<at::Tensor>> errors;
  for (size_t i : {size_t{0}, size_t{3}}) errors[i] = std::vector<at::Tensor>(n, at::zeros(kShapes[i], at::kDouble));
  double worst = 0;
  for (int step = 0; step < 3; ++step) {
    const std::vector<at::Tensor> got = hook_step(hook, step);
    for (size_t i = 0; i < kShapes.size(); ++i) {
      std::vector<at::Tensor> ms;
      for (int r = 0; r < n; ++r) ms.push_back(local_gradient(r, step, i).to(at::kDouble).view({kShapes[i][0], -1}));
      at::Tensor want;
      if (errors.count(i)) {
        for (int r = 0; r < n; ++r) ms[r] = ms[r] + errors[i][r];
        want = reference_compress(ms, q[i], errors[i]);
        worst = std::max({worst, relative(hook.error(i).view_as(errors[i][me]), errors[i][me]),
                          relative(hook.warm_start_q(i), q[i])});
      } else {
        want = at::stack(ms).mean(0);
      }
      worst = std::max(worst, relative(got[i].view_as(want), want));
    }
  }
  BOOST_TEST_MESSAGE("PowerSGD against float64, worst relative difference " << worst);
  MPIACCEL_CHECK_ALL(worst < 1e-4);
  MPIACCEL_CHECK_ALL(hook.iteration() == 3);
}

BOOST_AUTO_TEST_CASE(batched_powersgd_matches_a_reference_step_by_step) {
  at::set_num_threads(1);
  const int n = world().size(), me = world().rank();
  mpiaccel::detail::PowerSgdHook hook(powersgd(true));
  hook.attach(parameters(), names(), world());
  std::map<size_t, at::Tensor> q;
  std::map<size_t, std::vector<at::Tensor>> errors;  // per bucket, flat
  double worst = 0;
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<at::Tensor>> flats(kBuckets.size());  // [bucket][rank]
    for (size_t b = 0; b < kBuckets.size(); ++b)
      for (int r = 0; r < n; ++r) {
        std::vector<at::Tensor> parts;
        for (size_t i : kBuckets[b]) parts.push_back(local_gradient(r, step, i).to(at::kDouble).view({-1}));
        flats[b].push_back(at::cat(parts));
      }
    for (size_t b = 0; b < kBuckets.size() && step == 0; ++b) {
      const int64_t numel = flats[b][0].numel();
      q[b] = hook.initial_bucket_q(b, static_cast<int64_t>(std::ceil(std::sqrt(double(numel))))).to(at::kDouble);
      errors[b] = std::vector<at::Tensor>(n, at::zeros({numel}, at::kDouble));
    }
    const std::vector<at::Tensor> got = hook_step(hook, step);
    for (size_t b = 0; b < kBuckets.size(); ++b) {
      const int64_t numel = flats[b][0].numel();
      const int64_t side = q[b].size(0);
      std::vector<at::Tensor> ms;
      for (int r = 0; r < n; ++r) {
        at::Tensor square = at::zeros({side * side}, at::kDouble);
        square.narrow(0, 0, numel).copy_(flats[b][r] + errors[b][r]);
        ms.push_back(square.view({side, side}));
      }
      std::vector<at::Tensor> square_errors(n);
      const at::Tensor want = reference_compress(ms, q[b], square_errors).reshape({-1}).narrow(0, 0, numel);
      for (int r = 0; r < n; ++r) errors[b][r] = square_errors[r].reshape({-1}).narrow(0, 0, numel).clone();
      std::vector<at::Tensor> got_parts, error_parts;
      for (size_t i : kBuckets[b]) {
        got_parts.push_back(got[i].view({-1}));
        error_parts.push_back(hook.error(i).view({-1}));
      }
      worst = std::max({worst, relative(at::cat(got_parts), want), relative(at::cat(error_parts), errors[b][me]),
                        relative(hook.bucket_q(b), q[b])});
    }
  }
  BOOST_TEST_MESSAGE("batched PowerSGD against float64, worst relative difference " << worst);
  MPIACCEL_CHECK_ALL(worst < 1e-4);
}

BOOST_AUTO_TEST_CASE(powersgd_before_its_start_is_the_plain_all_reduce) {
  at::set_num_threads(1);
  PowerSgdOptions options = powersgd(false);
  options.start_iter = 2;
  mpiaccel::detail::PowerSgdHook hook(options);
  hook.attach(parameters(), names(), world());
  std::shared_ptr<CommHook> plain = make_all_reduce_hook();
  bool same = true;
  for (int step = 0; step < 2; ++step) {
    const auto got = hook_step(hook, step), want = hook_step(*plain, step);
    for (size_t i = 0; i < kShapes.size(); ++i) same = same && at::equal(got[i], want[i]);
  }
  MPIACCEL_CHECK_ALL(same);
  MPIACCEL_CHECK_ALL(hook.iteration() == 2);
  // Then it compresses: the [16, 12] matrix is no longer the exact mean (n > 1).
  const auto compressed = hook_step(hook, 2), exact = hook_step(*plain, 2);
  MPIACCEL_CHECK_ALL(world().size() == 1 || !at::allclose(compressed[0], exact[0], 1e-3, 1e-3));
  // The bias goes whole (divided before the sum, not after: rounding apart at 3 ranks).
  MPIACCEL_CHECK_ALL(at::allclose(compressed[1], exact[1], 1e-6, 1e-7));
}

BOOST_AUTO_TEST_CASE(a_16_bit_wrapper_rounds_powersgd_messages_only) {
  at::set_num_threads(1);
  PowerSgdOptions options = powersgd(false);
  mpiaccel::detail::PowerSgdHook full(options);
  options.allreduce_dtype = at::kBFloat16;
  mpiaccel::detail::PowerSgdHook wrapped(options);
  full.attach(parameters(), names(), world());
  wrapped.attach(parameters(), names(), world());
  double worst = 0;
  for (int step = 0; step < 3; ++step) {
    const auto a = hook_step(full, step), b = hook_step(wrapped, step);
    for (size_t i = 0; i < kShapes.size(); ++i) worst = std::max(worst, relative(b[i], a[i].to(at::kDouble)));
  }
  BOOST_TEST_MESSAGE("bf16-wrapped PowerSGD against fp32 messages: " << worst);
  MPIACCEL_CHECK_ALL(worst < 5e-2);
}

namespace {

// A hook of the user's own: the built-in all-reduce, counting what it sends.
class CountingHook final : public CommHook {
 public:
  std::string name() const override { return "counting"; }
  HookWork launch(GradBucket& bucket) override {
    bytes += bucket.buffer.numel() * static_cast<int64_t>(bucket.buffer.element_size());
    return inner_->launch(bucket);
  }
  int64_t bytes = 0;

 private:
  std::shared_ptr<CommHook> inner_ = make_all_reduce_hook();
};

ModelSpec small_gpt() {
  ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = 2;
  spec.n_embd = 32;
  spec.block_size = 16;
  return spec;
}

// Three SGD steps of the GPT under DDP with `config`, `precision` and, if
// given, a registered hook: the parameters after them.
std::vector<at::Tensor> train_ddp(const DdpConfig& config, const PrecisionPolicy& precision,
                                  std::shared_ptr<CommHook> hook = nullptr) {
  const int n = world().size(), rank = world().rank();
  torch::manual_seed(rank == 0 ? 7 : 1000 + rank);  // prepare() broadcasts rank 0's weights
  auto model = make_model("gpt", small_gpt());
  auto module = as_module(model);
  auto opt = std::make_shared<torch::optim::SGD>(module->parameters(), torch::optim::SGDOptions(0.5));
  auto strategy = make_ddp_strategy(config, world_ptr(), precision);
  if (hook) strategy->register_comm_hook(hook);
  strategy->prepare(module, opt);
  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(100 + step);
    const at::Tensor x = torch::randint(0, 256, {4 * n, 16}, torch::kLong).narrow(0, 4 * rank, 4);
    strategy->zero_grad(*opt);
    model->loss(model->forward(x), x).backward();
    strategy->after_backward();
    strategy->step(*opt);
  }
  std::vector<at::Tensor> out;
  for (const auto& p : module->parameters()) out.push_back(p.detach().clone());
  return out;
}

bool same_bits(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  bool same = a.size() == b.size();
  for (size_t i = 0; same && i < a.size(); ++i) same = at::equal(a[i], b[i]);
  return same;
}

PrecisionPolicy reduce_in(const std::string& dtype) {
  DistributedConfig d;
  d.reduce_dtype = choice_named<DtypeChoice>(dtype, "reduce_dtype");
  return PrecisionPolicy::from_config(d);
}

}  // namespace

BOOST_AUTO_TEST_CASE(exact_hooks_train_to_the_bits_of_plain_ddp) {
  at::set_num_threads(1);
  const DdpConfig plain;
  const auto reference = train_ddp(plain, reduce_in("fp32"));

  auto counting = std::make_shared<CountingHook>();
  MPIACCEL_CHECK_ALL(same_bits(reference, train_ddp(plain, reduce_in("fp32"), counting)));
  MPIACCEL_CHECK_ALL(counting->bytes > 0);

  DdpConfig late = plain;
  late.comm_hook = CommHookChoice::PowerSgd;  // Accelerate's spelling
  late.powersgd_start_iter = 1000;
  MPIACCEL_CHECK_ALL(same_bits(reference, train_ddp(late, reduce_in("fp32"))));

  DdpConfig bf16 = plain;
  bf16.comm_hook = CommHookChoice::Bf16;
  const auto hooked = train_ddp(bf16, reduce_in("fp32"));
  MPIACCEL_CHECK_ALL(same_bits(hooked, train_ddp(plain, reduce_in("bf16"))));
  MPIACCEL_CHECK_ALL(world().size() == 1 || !same_bits(hooked, reference));
}

BOOST_AUTO_TEST_CASE(conflicting_hook_settings_are_refused_in_one_line) {
  DdpConfig config;
  config.comm_hook = CommHookChoice::Fp16;
  BOOST_CHECK_EXCEPTION(make_comm_hook(config, at::kBFloat16), Error, [](const Error& e) {
    return std::string(e.what()).find("reduce_dtype is bf16") != std::string::npos;
  });
  config.comm_hook = CommHookChoice::None;
  config.comm_wrapper = CommWrapperChoice::Bf16;
  BOOST_CHECK_EXCEPTION(make_comm_hook(config, std::nullopt), Error, [](const Error& e) {
    return std::string(e.what()).find("set comm_hook = powersgd") != std::string::npos;
  });
  auto plain_hook = make_comm_hook(DdpConfig{}, std::nullopt);
  BOOST_TEST(plain_hook->name() == "all_reduce");
}
