// ctest: links mpiaccel; timeout 120
// The mixed-precision policy from the config, FSDP's divide factors, CPU bf16
// autocast, and the GradScaler's single-process logic (its cross-rank
// agreement is tests/mpi/test_grad_scaler.cpp).
#define BOOST_TEST_MODULE precision
#include <boost/test/unit_test.hpp>

#include <optional>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include <cmath>
#include <limits>

#include "runtime/torch_compat.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/precision.hpp"

using namespace mpiaccel;

namespace {

DistributedConfig distributed(const std::string& mp, const std::string& param = "auto",
                              const std::string& reduce = "auto", const std::string& buffer = "auto") {
  DistributedConfig c;
  // The text read as the config reads it (an unknown one throws there).
  c.mixed_precision = choice_named<MixedPrecision>(mp, "[distributed] mixed_precision");
  c.param_dtype = choice_named<DtypeChoice>(param, "[distributed] param_dtype");
  c.reduce_dtype = choice_named<DtypeChoice>(reduce, "[distributed] reduce_dtype");
  c.buffer_dtype = choice_named<DtypeChoice>(buffer, "[distributed] buffer_dtype");
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(policy_from_mixed_precision) {
  PrecisionPolicy no = PrecisionPolicy::from_config(distributed("no"));
  BOOST_TEST((no.param_dtype == at::kFloat && no.reduce_dtype == at::kFloat && no.buffer_dtype == at::kFloat));
  BOOST_TEST(!no.autocast());
  BOOST_TEST(!no.needs_grad_scaler());

  PrecisionPolicy bf16 = PrecisionPolicy::from_config(distributed("bf16"));
  BOOST_TEST((bf16.param_dtype == at::kBFloat16 && bf16.reduce_dtype == at::kBFloat16 &&
              bf16.buffer_dtype == at::kBFloat16));
  BOOST_TEST(bf16.autocast());
  BOOST_TEST(!bf16.needs_grad_scaler());  // fp32's exponent range

  PrecisionPolicy fp16 = PrecisionPolicy::from_config(distributed("fp16"));
  BOOST_TEST((fp16.param_dtype == at::kHalf && fp16.reduce_dtype == at::kHalf));
  BOOST_TEST(fp16.needs_grad_scaler());
  BOOST_TEST(fp16.describe() == "param=fp16 reduce=fp16 buffer=fp16");
  BOOST_TEST((PrecisionPolicy::kMasterDtype == at::kFloat));
}

BOOST_AUTO_TEST_CASE(policy_overrides) {
  // FSDP's common recipe: compute in bf16, reduce in fp32.
  PrecisionPolicy p = PrecisionPolicy::from_config(distributed("bf16", "auto", "fp32"));
  BOOST_TEST((p.param_dtype == at::kBFloat16 && p.reduce_dtype == at::kFloat && p.buffer_dtype == at::kBFloat16));
  // fp32 compute with fp16 communication still needs loss scaling.
  PrecisionPolicy q = PrecisionPolicy::from_config(distributed("no", "auto", "fp16", "bf16"));
  BOOST_TEST((q.param_dtype == at::kFloat && q.reduce_dtype == at::kHalf && q.buffer_dtype == at::kBFloat16));
  BOOST_TEST(q.needs_grad_scaler());
  BOOST_TEST(!q.autocast());
  BOOST_CHECK_THROW(PrecisionPolicy::from_config(distributed("fp8")), Error);
  try {
    PrecisionPolicy::from_config(distributed("bf16", "int8"));
    BOOST_FAIL("int8 accepted");
  } catch (const Error& e) {
    BOOST_TEST(e.message().find("param_dtype") != std::string::npos);
    BOOST_TEST(e.message().find("accepted: auto|fp32|bf16|fp16") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(dtype_names_round_trip) {
  for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf})
    BOOST_TEST((parse_precision_dtype(precision_dtype_name(t)) == t));
  BOOST_TEST((parse_precision_dtype("bfloat16") == at::kBFloat16));
  BOOST_CHECK_THROW(parse_precision_dtype("fp64"), Error);
}

BOOST_AUTO_TEST_CASE(divide_factors_match_fsdp) {
  // torch.distributed.fsdp._get_gradient_predivide_factor.
  const std::pair<int, double> expected[] = {{1, 1}, {2, 2}, {3, 2}, {4, 2}, {8, 4}, {16, 4}, {64, 8}, {128, 16}};
  for (const auto& [world, first] : expected) {
    auto [pre, post] = gradient_divide_factors(world);
    BOOST_TEST(pre == first, "world " << world);
    BOOST_TEST(pre * post == double(world), boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(gradient_division_splits_only_16_bit_reductions) {
  // fp32 (or no cast): 1/world in one step.
  for (const auto wire : {std::optional<at::ScalarType>{}, std::optional<at::ScalarType>{at::kFloat}}) {
    const GradientDivision d = gradient_division(4, wire);
    BOOST_TEST(!d.split);
    BOOST_TEST(d.before == 0.25);
    BOOST_TEST(d.after == 1.0);
  }
  // bf16/fp16 over 8 ranks: FSDP's 1/4 before and 1/2 after.
  for (const at::ScalarType wire : {at::kBFloat16, at::kHalf}) {
    const GradientDivision d = gradient_division(8, wire);
    BOOST_TEST(d.split);
    BOOST_TEST(d.before == 0.25);
    BOOST_TEST(d.after == 0.5);
  }
  // One rank: nothing to divide, nothing to split.
  const GradientDivision one = gradient_division(1, at::kBFloat16);
  BOOST_TEST(!one.split);
  BOOST_TEST(one.before == 1.0);
}

BOOST_AUTO_TEST_CASE(cpu_bf16_autocast) {
  at::Tensor x = at::randn({4, 8});
  at::Tensor w = at::randn({3, 8});
  BOOST_TEST(!mpiaccel::detail::autocast_enabled(c10::DeviceType::CPU));
  {
    AutocastGuard guard("cpu", at::kBFloat16);
    BOOST_TEST(guard.active());
    BOOST_TEST(mpiaccel::detail::autocast_enabled(c10::DeviceType::CPU));
    at::Tensor y = at::linear(x, w);
    BOOST_TEST((y.scalar_type() == at::kBFloat16));
    BOOST_TEST(at::allclose(y.to(at::kFloat), at::linear(x.to(at::kBFloat16), w.to(at::kBFloat16)).to(at::kFloat)));
    {
      AutocastGuard fp32("cpu", at::kFloat);  // a no-op guard inside
      BOOST_TEST(!fp32.active());
      BOOST_TEST(mpiaccel::detail::autocast_enabled(c10::DeviceType::CPU));
    }
  }
  BOOST_TEST(!mpiaccel::detail::autocast_enabled(c10::DeviceType::CPU));
  BOOST_TEST((at::linear(x, w).scalar_type() == at::kFloat));
  // fp16 has no CPU kernels in LibTorch 1.13: refused with the way out.
  try {
    AutocastGuard guard("cpu", at::kHalf);
    BOOST_FAIL("fp16 on CPU accepted");
  } catch (const Error& e) {
    BOOST_TEST(e.message().find("mixed_precision = bf16") != std::string::npos);
  }
  BOOST_TEST(!mpiaccel::detail::autocast_enabled(c10::DeviceType::CPU));
  BOOST_CHECK_THROW(AutocastGuard("tpu", at::kBFloat16), Error);
}

BOOST_AUTO_TEST_CASE(scaler_defaults_are_accelerates) {
  GradScaler scaler;
  BOOST_TEST(scaler.scale() == 65536.0);
  BOOST_TEST(scaler.options().growth_factor == 2.0);
  BOOST_TEST(scaler.options().backoff_factor == 0.5);
  BOOST_TEST(scaler.options().growth_interval == 2000);
  at::Tensor loss = at::full({}, 0.5, at::kHalf);
  at::Tensor scaled = scaler.scale(loss);
  BOOST_TEST((scaled.scalar_type() == at::kFloat));
  BOOST_TEST(scaled.item<double>() == 32768.0);
}

BOOST_AUTO_TEST_CASE(scaler_single_process_cycle) {
  GradScalerOptions options;
  options.init_scale = 1024;
  options.growth_interval = 2;
  GradScaler scaler(options);
  at::Tensor g = at::full({3}, 2048.0);
  int steps = 0;
  scaler.unscale_({g, at::Tensor()});
  scaler.unscale_({g});  // once per step: the second call does nothing
  BOOST_TEST(at::allclose(g, at::full({3}, 2.0)));
  BOOST_TEST(scaler.step([&] { ++steps; }));
  scaler.update();
  BOOST_TEST(scaler.growth_tracker() == 1);
  g.fill_(1024.0);
  scaler.unscale_({g});
  BOOST_TEST(scaler.step([&] { ++steps; }));
  scaler.update();
  BOOST_TEST(scaler.scale() == 2048.0);  // grown after 2 finite steps
  BOOST_TEST(scaler.growth_tracker() == 0);

  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    at::Tensor h = at::ones({4});
    h[2] = bad;
    scaler.unscale_({h});
    BOOST_TEST(!scaler.step([&] { ++steps; }));
    scaler.update();
  }
  BOOST_TEST(steps == 2);
  BOOST_TEST(scaler.scale() == 512.0);  // backed off twice
  BOOST_TEST(scaler.skipped_steps() == 2);
}

BOOST_AUTO_TEST_CASE(scaler_misuse_is_an_error) {
  GradScaler scaler;
  BOOST_CHECK_THROW(scaler.update(), Error);                   // no step recorded
  BOOST_CHECK_THROW(scaler.step([] {}), Error);                // not unscaled
  GradScalerOptions bad;
  bad.backoff_factor = 1.5;
  BOOST_CHECK_THROW(GradScaler{bad}, Error);
  // Disabled (bf16/fp32 runs): scale 1, never skips, needs no unscale.
  GradScalerOptions off;
  off.enabled = false;
  GradScaler disabled(off);
  at::Tensor loss = at::full({}, 3.0);
  BOOST_TEST(disabled.scale(loss).item<double>() == 3.0);
  BOOST_TEST(disabled.step([] {}));
  disabled.update();
  BOOST_TEST(disabled.scale() == 1.0);
}

BOOST_AUTO_TEST_CASE(scaler_state_round_trip) {
  GradScalerOptions options;
  options.init_scale = 3.0 / 7.0;  // not representable in few digits
  GradScaler a(options);
  at::Tensor g = at::ones({2});
  a.unscale_({g});
  a.step([] {});
  a.update();
  GradScaler b;
  b.load_state(a.state());
  BOOST_TEST(b.scale() == a.scale());  // exact
  BOOST_TEST(b.growth_tracker() == 1);
  BOOST_CHECK_THROW(b.load_state({{"scale", "-1"}, {"growth_tracker", "0"}}), Error);
  BOOST_CHECK_THROW(b.load_state({{"scale", "2"}}), Error);
  BOOST_CHECK_THROW(b.load_state({{"scale", "2x"}, {"growth_tracker", "0"}}), Error);
}
