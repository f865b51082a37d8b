// ctest: links mpiaccel; np 1 2 3 4 6; timeout 180
// The pipelined ring all-reduce that carries large all-reduces across nodes
// (src/comm/ring_all_reduce.cpp, docs/comm.md, "Across nodes"), driven
// directly over a duplicate of the world (one host has no second node to
// send it across; tests/scripts/test_cluster_*.sh run it between hosts):
// sums, minima and maxima of every dtype equal what each rank computes alone,
// at sizes that leave chunks uneven, empty, one segment and many segments
// (short segments force deep pipelines); the same as MPI_Allreduce's result;
// bit-identical on every rank. Its halves, the ring reduce-scatter and
// all-gather (in place and not), equal what each rank computes alone and
// leave the input as given; so do the two-level halves and all-reduce of
// NodeTopology over nodes pretended by rank color (in blocks, round robin;
// 2 x 2, 3 x 2 and 2 x 3).
#define BOOST_TEST_MODULE ring_all_reduce
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <mpi.h>

#include <vector>

#include "comm/hierarchical_all_reduce.hpp"
#include "comm/mpi_types.hpp"
#include "comm/ring_all_reduce.hpp"

namespace {

using mpiaccel::ReduceOp;
using mpiaccel::test::world;

// Rank r's element i: small integers, exact in every dtype's sum at 4 ranks.
at::Tensor values_of(int rank, int64_t count, at::ScalarType dtype) {
  return ((at::arange(count, at::kLong) * 7 + rank * 13) % 29 - 14).to(dtype);
}

at::Tensor ring(const at::Tensor& input, ReduceOp op, int64_t segment_bytes) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  at::Tensor out = input.clone();
  mpiaccel::detail::ring_all_reduce(out.data_ptr(), out.numel(), out.element_size(),
                                    mpiaccel::detail::mpi_datatype(out.scalar_type()),
                                    mpiaccel::detail::mpi_reduce_op(op, out.scalar_type()), comm, segment_bytes);
  MPI_Comm_free(&comm);
  return out;
}

at::Tensor expected(int64_t count, at::ScalarType dtype, ReduceOp op) {
  at::Tensor result = values_of(0, count, at::kDouble);
  for (int r = 1; r < world().size(); ++r) {
    const at::Tensor v = values_of(r, count, at::kDouble);
    result = op == ReduceOp::Sum ? result + v : op == ReduceOp::Max ? at::maximum(result, v) : at::minimum(result, v);
  }
  return result.to(dtype);
}

}  // namespace

BOOST_AUTO_TEST_CASE(ring_equals_each_ranks_own_reduction) {
  mpiaccel::detail::init_mpi_types();
  bool ok = true;
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
      for (int64_t count : {0, 1, 3, 5, 1000, 65537})
        for (int64_t segment : {int64_t{8}, int64_t{4096}, mpiaccel::detail::kRingSegmentBytes}) {
          if (segment == 8 && count > 1000) continue;  // a message per element: enough at 1000
          const at::Tensor got = ring(values_of(world().rank(), count, dtype), op, segment);
          const bool same = at::equal(got, expected(count, dtype, op));
          if (!same)
            BOOST_TEST_MESSAGE("mismatch: dtype " << dtype << ", count " << count << ", segment " << segment);
          ok = ok && same;
        }
  MPIACCEL_CHECK_ALL(ok);
}

BOOST_AUTO_TEST_CASE(ring_agrees_with_mpi_allreduce_on_random_floats) {
  mpiaccel::detail::init_mpi_types();
  at::manual_seed(world().rank() + 1);
  const at::Tensor input = at::randn({300001});
  const at::Tensor got = ring(input, ReduceOp::Sum, 65536);
  at::Tensor want = input.clone();
  MPI_Allreduce(MPI_IN_PLACE, want.data_ptr(), static_cast<int>(want.numel()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  // Summed in another order: float rounding apart.
  MPIACCEL_CHECK_ALL(at::allclose(got, want, 1e-5, 1e-5));
  // Every rank holds the same bits.
  at::Tensor first = got.clone();
  MPI_Bcast(first.data_ptr(), static_cast<int>(first.numel()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  MPIACCEL_CHECK_ALL(at::equal(first, got));
}

namespace {

MPI_Comm duplicate_world() {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  return comm;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ring_halves_equal_reduce_scatter_and_all_gather) {
  mpiaccel::detail::init_mpi_types();
  const int n = world().size(), me = world().rank();
  bool ok = true;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong, at::kByte})
    for (int64_t block : {0, 1, 7, 5000})
      for (int64_t segment : {int64_t{8}, mpiaccel::detail::kRingSegmentBytes}) {
        if (segment == 8 && block > 1000) continue;
        MPI_Comm comm = duplicate_world();
        const MPI_Datatype type = mpiaccel::detail::mpi_datatype(dtype);
        // Reduce-scatter: rank r gets the sum of block r (small integers: exact in every dtype).
        if (dtype != at::kByte) {
          const at::Tensor input = values_of(me, n * block, dtype);
          at::Tensor output = at::empty({block}, dtype);
          mpiaccel::detail::ring_reduce_scatter(input.data_ptr(), output.data_ptr(), block, input.element_size(),
                                                type, mpiaccel::detail::mpi_reduce_op(ReduceOp::Sum, dtype), comm,
                                                segment);
          ok = ok && at::equal(output, expected(n * block, dtype, ReduceOp::Sum).narrow(0, me * block, block));
          ok = ok && at::equal(input, values_of(me, n * block, dtype));  // left as given
        }
        // All-gather, out of place and in place.
        const at::Tensor mine = (at::arange(block, at::kLong) % 100 + me).to(dtype);
        at::Tensor want = at::empty({n * block}, dtype);
        for (int r = 0; r < n; ++r) want.narrow(0, r * block, block).copy_((at::arange(block, at::kLong) % 100 + r).to(dtype));
        at::Tensor out = at::zeros({n * block}, dtype);
        mpiaccel::detail::ring_all_gather(mine.data_ptr(), out.data_ptr(), block, mine.element_size(), type, comm, segment);
        ok = ok && at::equal(out, want);
        at::Tensor in_place = at::zeros({n * block}, dtype);
        in_place.narrow(0, me * block, block).copy_(mine);
        mpiaccel::detail::ring_all_gather(in_place.narrow(0, me * block, block).data_ptr(), in_place.data_ptr(), block,
                                          mine.element_size(), type, comm, segment);
        ok = ok && at::equal(in_place, want);
        MPI_Comm_free(&comm);
      }
  MPIACCEL_CHECK_ALL(ok);
}

// The two-level reduce-scatter and all-gather (hierarchical_all_reduce.cpp),
// over nodes pretended on one host, L ranks each, in blocks ({0,1} {2,3}) and
// round robin ({0,2} {1,3}), so blocks must be regrouped by place in the node
// and back; at np 6 both 3 nodes x 2 and 2 nodes x 3, where a swap of nodes
// and places would show. Small blocks cross by MPI, large ones (≥ 1 MiB
// across) by the ring. Every hierarchical layout must have run its cases.
BOOST_AUTO_TEST_CASE(two_level_halves_over_pretended_nodes) {
  mpiaccel::detail::init_mpi_types();
  const int n = world().size(), me = world().rank();
  bool ok = true;
  for (int local : {2, 3})
    for (bool round_robin : {false, true}) {
      if (n % local != 0 || n == local) continue;
      const int color = round_robin ? me % (n / local) : me / local;
      auto topology = mpiaccel::detail::NodeTopology::create(MPI_COMM_WORLD, color);
      ok = ok && topology && topology->hierarchical() && topology->local_size() == local;
      int ran = 0;
      for (at::ScalarType dtype : {at::kFloat, at::kLong})
        for (int64_t block : {0, 1, 7, 300000}) {
          if (!topology || !topology->takes_halves(n * block * c10::elementSize(dtype), n * block)) continue;
          ++ran;
          const MPI_Datatype type = mpiaccel::detail::mpi_datatype(dtype);
          const at::Tensor input = values_of(me, n * block, dtype);
          at::Tensor output = at::empty({block}, dtype);
          topology->reduce_scatter(input.data_ptr(), output.data_ptr(), block, input.element_size(), type,
                                   mpiaccel::detail::mpi_reduce_op(ReduceOp::Sum, dtype));
          ok = ok && at::equal(output, expected(n * block, dtype, ReduceOp::Sum).narrow(0, me * block, block));
          ok = ok && at::equal(input, values_of(me, n * block, dtype));
          at::Tensor want = at::empty({n * block}, dtype);
          for (int r = 0; r < n; ++r)
            want.narrow(0, r * block, block).copy_((at::arange(block, at::kLong) % 100 + r).to(dtype));
          at::Tensor gathered = at::zeros({n * block}, dtype);
          gathered.narrow(0, me * block, block).copy_(want.narrow(0, me * block, block));
          topology->all_gather(gathered.narrow(0, me * block, block).data_ptr(), gathered.data_ptr(), block,
                               gathered.element_size(), type);  // in place
          ok = ok && at::equal(gathered, want);
          at::Tensor summed = values_of(me, n * block, dtype);
          topology->all_reduce(summed.data_ptr(), summed.numel(), summed.element_size(), type,
                               mpiaccel::detail::mpi_reduce_op(ReduceOp::Sum, dtype));
          ok = ok && at::equal(summed, expected(n * block, dtype, ReduceOp::Sum));
        }
      ok = ok && ran == 8;
    }
  // One rank per pretended node: not hierarchical; the halves go around the ring for large buffers only.
  if (n > 1) {
    auto topology = mpiaccel::detail::NodeTopology::create(MPI_COMM_WORLD, me);
    ok = ok && topology && !topology->hierarchical() && topology->takes_halves(int64_t{1} << 20, 1 << 18) &&
         !topology->takes_halves(4096, 1024);
  }
  MPIACCEL_CHECK_ALL(ok);
}
