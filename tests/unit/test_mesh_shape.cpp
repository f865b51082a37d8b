// ctest: links mpiaccel; timeout 60
// The mesh a config asks for (mesh_shape_of): [parallelism] sizes with auto,
// [fsdp] HYBRID_SHARD's groups as the older spelling of dp_shard, and the
// one-line errors with the numbers.
#define BOOST_TEST_MODULE mesh_shape
#include <boost/test/unit_test.hpp>

#include <string>

#include "mpiaccel/config.hpp"
#include "mpiaccel/mesh.hpp"
#include "support/scratch_dir.hpp"

using mpiaccel::Config;
using mpiaccel::mesh_shape_of;
using mpiaccel::test::message_of;

namespace {

std::string shape(const std::vector<std::string>& overrides, int64_t world, int64_t per_node = 4) {
  return mesh_shape_of(Config::defaults(overrides), world, per_node).describe();
}

std::string error(const std::vector<std::string>& overrides, int64_t world, int64_t per_node = 4) {
  return message_of([&] { mesh_shape_of(Config::defaults(overrides), world, per_node); });
}

}  // namespace

BOOST_AUTO_TEST_CASE(defaults_are_one_data_parallel_group_of_every_rank) {
  BOOST_TEST(shape({}, 1) == "dp_replicate 1 × dp_shard 1 (1 rank)");
  BOOST_TEST(shape({"distributed.strategy=ddp"}, 4) == "dp_replicate 1 × dp_shard 4 (4 ranks)");
  BOOST_TEST(Config::defaults().get("parallelism.dp_shard_size") == "auto");
}

BOOST_AUTO_TEST_CASE(one_size_may_be_auto) {
  const std::string fsdp = "distributed.strategy=fsdp";
  BOOST_TEST(shape({fsdp, "parallelism.dp_replicate_size=2"}, 8) == "dp_replicate 2 × dp_shard 4 (8 ranks)");
  BOOST_TEST(shape({fsdp, "parallelism.dp_replicate_size=auto", "parallelism.dp_shard_size=2"}, 6) ==
             "dp_replicate 3 × dp_shard 2 (6 ranks)");
  BOOST_TEST(shape({fsdp, "parallelism.dp_replicate_size=2", "parallelism.dp_shard_size=3"}, 6) ==
             "dp_replicate 2 × dp_shard 3 (6 ranks)");
}

BOOST_AUTO_TEST_CASE(hybrid_shard_is_the_older_spelling_of_dp_shard) {
  const std::string fsdp = "distributed.strategy=fsdp";
  const std::string hybrid = "fsdp.sharding_strategy=HYBRID_SHARD";
  BOOST_TEST(shape({fsdp, hybrid, "fsdp.hybrid_group_size=2"}, 8) == "dp_replicate 4 × dp_shard 2 (8 ranks)");
  BOOST_TEST(shape({fsdp, hybrid}, 8, /*per_node=*/4) == "dp_replicate 2 × dp_shard 4 (8 ranks)");
  BOOST_TEST(shape({fsdp, hybrid, "fsdp.hybrid_group_size=2", "parallelism.dp_shard_size=2"}, 8) ==
             "dp_replicate 4 × dp_shard 2 (8 ranks)");
  BOOST_TEST(error({fsdp, hybrid, "fsdp.hybrid_group_size=2", "parallelism.dp_shard_size=4"}, 8) ==
             "[fsdp] HYBRID_SHARD groups of 2 ranks, but [parallelism] dp_shard_size is 4; set one of them "
             "(dp_shard_size is the mesh's name for the same)");
  BOOST_TEST(error({fsdp, hybrid, "fsdp.hybrid_group_size=3"}, 8) ==
             "[fsdp] hybrid_group_size = 3 does not divide the 8 ranks; pick a divisor (or 0 for the ranks of "
             "one node)");
  BOOST_TEST(error({fsdp, hybrid}, 8, /*per_node=*/0).find("the nodes run different numbers of ranks") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(shapes_that_do_not_fit_are_one_line_with_the_numbers) {
  BOOST_TEST(error({"parallelism.dp_replicate_size=2", "parallelism.dp_shard_size=3"}, 4) ==
             "[parallelism] dp_replicate_size 2 × dp_shard_size 3 = 6, but the job has 4 ranks; make the product "
             "4 or set one size to auto");
  BOOST_TEST(error({"parallelism.dp_replicate_size=auto"}, 4) ==
             "[parallelism] dp_replicate_size and dp_shard_size are both auto; set one of them");
  BOOST_TEST(error({"parallelism.dp_replicate_size=3"}, 4) ==
             "[parallelism] dp_replicate_size 3 does not divide the 4 ranks; pick a divisor, or give both sizes");
  BOOST_TEST(error({"distributed.strategy=zero", "parallelism.dp_replicate_size=2"}, 4).find(
                 "[parallelism] dp_replicate_size 2: ZeRO shards over every data-parallel rank") == 0);
  BOOST_TEST(message_of([] { Config::defaults({"parallelism.dp_shard_size=0"}); }).find(
                 "0 is out of range; accepted: a size >= 1 or auto") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(pipeline_stages_are_the_outermost_dimension) {
  BOOST_TEST(shape({"parallelism.pp_size=2"}, 4) == "pp 2 × dp_replicate 1 × dp_shard 2 (4 ranks)");
  BOOST_TEST(shape({"parallelism.pp_size=2", "parallelism.tp_size=2"}, 8) ==
             "pp 2 × dp_replicate 1 × dp_shard 2 × tp 2 (8 ranks)");
  BOOST_TEST(shape({"parallelism.pp_size=4"}, 4) == "pp 4 × dp_replicate 1 × dp_shard 1 (4 ranks)");
  BOOST_TEST(error({"parallelism.pp_size=3"}, 4) ==
             "[parallelism] pp_size 3 does not divide the 4 ranks; pick a divisor of the world size");
  BOOST_TEST(error({"parallelism.pp_size=2", "parallelism.tp_size=4"}, 4) ==
             "[parallelism] tp_size 4 does not divide the 2 ranks of a pipeline stage (4 / pp_size 2); pick a "
             "divisor of the world size");
  BOOST_TEST(error({"parallelism.pp_size=2", "parallelism.dp_replicate_size=3"}, 4) ==
             "[parallelism] dp_replicate_size 3 does not divide the 2 data-parallel ranks (4 / pp_size 2); pick a "
             "divisor, or give both sizes");
}
