// ctest: links mpiaccel; timeout 60
// ZeRO++'s int8 block quantization of FSDP's weight all-gather
// (src/fsdp/quantized_gather.cpp), single process, with the gathered buffer
// built by hand as the all-gather would: every value comes back within half
// its group's scale (max |x| / 127 / 2), zeros and all-zero groups exactly,
// the largest value of each group exactly; the tags travel exactly; blocks
// that end inside a group; a block of 4·values + 4·groups + 8 bytes at most.
// qgZ's blocks (one per destination, no tags) quantized all at once equal
// the same rows quantized one by one.
#define BOOST_TEST_MODULE quantized_gather
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include "fsdp/quantized_gather.hpp"

using namespace mpiaccel::detail;

BOOST_AUTO_TEST_CASE(values_return_within_half_a_scale) {
  at::manual_seed(3);
  for (int64_t values : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{1000}}) {
    const int parts = 3;
    const QuantizedBlock layout = quantized_block(values, 2);
    BOOST_TEST(layout.stride <= values + 3 + 4 * layout.groups + 8);
    BOOST_TEST(layout.stride % 4 == 0);
    std::vector<at::Tensor> shards;
    at::Tensor gathered = at::zeros({parts * layout.stride}, at::kByte);
    for (int r = 0; r < parts; ++r) {
      at::Tensor shard = at::randn({values}) * (r + 1);
      if (r == 1) shard.narrow(0, 0, std::min<int64_t>(values, 256)).zero_();  // an all-zero group
      shards.push_back(shard);
      quantize_blocks(shard.view({1, -1}), at::tensor({float(r), 7.0f}).view({1, -1}), layout,
                      gathered.narrow(0, r * layout.stride, layout.stride));
    }
    const at::Tensor out = dequantize_blocks(gathered, layout, parts, at::TensorOptions().dtype(at::kFloat))
                               .view({parts, values + 2});
    for (int r = 0; r < parts; ++r) {
      const at::Tensor got = out[r].narrow(0, 0, values), want = shards[r];
      const int64_t groups = layout.groups;
      at::Tensor padded = at::constant_pad_nd(want, {0, groups * kQuantGroup - values}).view({groups, kQuantGroup});
      const at::Tensor half_scale =
          (padded.abs().amax(1) / 127 / 2).repeat_interleave(kQuantGroup).narrow(0, 0, values);
      BOOST_TEST(((got - want).abs() <= half_scale * 1.0001 + 1e-12).all().item<bool>());
      BOOST_TEST(at::equal(got.masked_select(want == 0), want.masked_select(want == 0)));
      // Each group's largest magnitude is ±127 scales: back exactly (to float rounding).
      const at::Tensor arg = padded.abs().argmax(1);
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t i = g * kQuantGroup + arg[g].item<int64_t>();
        if (i < values) BOOST_TEST(std::abs(got[i].item<float>() - want[i].item<float>()) <= 1e-6 * std::abs(want[i].item<float>()));
      }
      BOOST_TEST(out[r][values].item<float>() == float(r));
      BOOST_TEST(out[r][values + 1].item<float>() == 7.0f);
    }
  }
}

BOOST_AUTO_TEST_CASE(rows_at_once_equal_rows_one_by_one) {
  at::manual_seed(5);
  const int64_t parts = 4, values = 700;
  const QuantizedBlock layout = quantized_block(values, 0);
  const at::Tensor rows = at::randn({parts, values}) * at::arange(1, parts + 1).unsqueeze(1);
  at::Tensor together = at::zeros({parts * layout.stride}, at::kByte);
  quantize_blocks(rows, at::Tensor(), layout, together);
  at::Tensor one_by_one = at::zeros({parts * layout.stride}, at::kByte);
  for (int64_t r = 0; r < parts; ++r)
    quantize_blocks(rows[r].view({1, -1}), at::Tensor(), layout, one_by_one.narrow(0, r * layout.stride, layout.stride));
  BOOST_TEST(at::equal(together, one_by_one));
  const at::Tensor back = dequantize_blocks(together, layout, parts, at::TensorOptions().dtype(at::kFloat));
  BOOST_TEST(back.numel() == parts * values);
  BOOST_TEST(((back.view({parts, values}) - rows).abs().max().item<float>() <= rows.abs().max().item<float>() / 254 * 1.0001));
}
