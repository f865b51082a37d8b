// ctest: links mpiaccel; np 1 2 3 4; timeout 120
// The MPI communicator: every op (all-to-all too) x dtype x size against values each rank
// computes from (seed, rank, world) alone, so checking needs no extra
// communication; plus split, bytes and scalar ops, all_ok, argument errors
// and async progress.
#define BOOST_TEST_MODULE comm
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiaccel/error.hpp"

namespace {

using mpiaccel::ReduceOp;
using mpiaccel::test::world;

const std::vector<at::ScalarType> kAllTypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16,
                                               at::kInt,   at::kLong,   at::kByte};
const std::vector<int64_t> kSizes = {0, 1, 7, 1000, 65537};

bool is_floating(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// Element i of rank r's data: small integers, so sums of up to 4 ranks are
// exact in every dtype (bf16 holds integers up to 256 exactly; uint8 stays
// non-negative and its sums below 256).
double value(int seed, int rank, int64_t i, at::ScalarType type) {
  const int64_t mix = (seed * 31 + rank * 7 + i * 3) % 17;
  return type == at::kByte ? static_cast<double>(mix % 9) : static_cast<double>(mix - 8);
}

std::vector<double> values(int seed, int rank, int64_t n, at::ScalarType type, int64_t offset = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value(seed, rank, offset + i, type);
  return v;
}

at::Tensor make(const std::vector<double>& v, at::ScalarType type) {
  return at::tensor(v, at::kDouble).to(type).contiguous();
}

std::vector<double> read(const at::Tensor& t) {
  at::Tensor d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

// The reduction over ranks of element i, from the generator alone.
double reduced(int seed, int64_t i, ReduceOp op, at::ScalarType type, int world_size) {
  double acc = value(seed, 0, i, type);
  for (int r = 1; r < world_size; ++r) {
    const double x = value(seed, r, i, type);
    if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += x;
    if (op == ReduceOp::Max) acc = std::max(acc, x);
    if (op == ReduceOp::Min) acc = std::min(acc, x);
  }
  return op == ReduceOp::Avg ? acc / world_size : acc;
}

// Exact match, except Avg of 16-bit floats (one rounding of sum/n to 16 bits).
bool matches(const std::vector<double>& got, const std::vector<double>& want, ReduceOp op,
             at::ScalarType type) {
  if (got.size() != want.size()) return false;
  const double tol = op == ReduceOp::Avg ? (type == at::kBFloat16 ? 1e-2 : 1e-3) : 0.0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::abs(got[i] - want[i]) > tol * std::max(1.0, std::abs(want[i]))) return false;
  return true;
}

std::vector<ReduceOp> ops_for(at::ScalarType type) {
  if (is_floating(type)) return {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};
  return {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};
}

std::string label(const char* op, at::ScalarType type, int64_t n, ReduceOp rop = ReduceOp::Sum) {
  return std::string(op) + " " + c10::toString(type) + " n=" + std::to_string(n) + " " +
         mpiaccel::reduce_op_name(rop);
}

// Runs `body`, returns the mpiaccel::Error message it threw ("" if none).
template <typename F>
std::string error_of(F&& body) {
  try {
    body();
  } catch (const mpiaccel::Error& e) {
    return e.message();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(all_reduce_every_dtype_size_and_op) {
  auto& comm = world();
  const int seed = 1;
  for (at::ScalarType type : kAllTypes)
    for (int64_t n : kSizes)
      for (ReduceOp op : ops_for(type)) {
        at::Tensor t = make(values(seed, comm.rank(), n, type), type);
        comm.all_reduce(t, op);
        std::vector<double> want(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          want[static_cast<size_t>(i)] = reduced(seed, i, op, type, comm.size());
        BOOST_TEST_CONTEXT(label("all_reduce", type, n, op)) {
          MPIACCEL_CHECK_ALL(t.scalar_type() == type && matches(read(t), want, op, type));
        }
      }
}

BOOST_AUTO_TEST_CASE(reduce_scatter_every_dtype_size_and_op) {
  auto& comm = world();
  const int seed = 2;
  const int64_t p = comm.size();
  for (at::ScalarType type : kAllTypes)
    for (int64_t n : kSizes)
      for (ReduceOp op : ops_for(type)) {
        at::Tensor input = make(values(seed, comm.rank(), n * p, type), type);
        at::Tensor output = at::empty({n}, at::TensorOptions().dtype(type));
        comm.reduce_scatter(output, input, op);
        std::vector<double> want(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          want[static_cast<size_t>(i)] = reduced(seed, comm.rank() * n + i, op, type, comm.size());
        BOOST_TEST_CONTEXT(label("reduce_scatter", type, n, op)) {
          MPIACCEL_CHECK_ALL(matches(read(output), want, op, type));
        }
      }
}

BOOST_AUTO_TEST_CASE(all_gather_every_dtype_and_size) {
  auto& comm = world();
  const int seed = 3;
  for (at::ScalarType type : kAllTypes)
    for (int64_t n : kSizes) {
      at::Tensor input = make(values(seed, comm.rank(), n, type), type);
      at::Tensor output = at::empty({n * comm.size()}, at::TensorOptions().dtype(type));
      comm.all_gather(output, input);
      std::vector<double> want;
      for (int r = 0; r < comm.size(); ++r) {
        auto block = values(seed, r, n, type);
        want.insert(want.end(), block.begin(), block.end());
      }
      BOOST_TEST_CONTEXT(label("all_gather", type, n)) {
        MPIACCEL_CHECK_ALL(matches(read(output), want, ReduceOp::Sum, type));
      }
    }
}

BOOST_AUTO_TEST_CASE(all_to_all_every_dtype_and_size) {
  auto& comm = world();
  const int seed = 9;
  for (at::ScalarType type : kAllTypes)
    for (int64_t n : kSizes) {
      // Block p of rank r's input is values(seed, r·size + p): rank p gets it as its block r.
      std::vector<double> mine, want;
      for (int p = 0; p < comm.size(); ++p) {
        auto block = values(seed, comm.rank() * comm.size() + p, n, type);
        mine.insert(mine.end(), block.begin(), block.end());
        auto from = values(seed, p * comm.size() + comm.rank(), n, type);
        want.insert(want.end(), from.begin(), from.end());
      }
      at::Tensor output = at::empty({n * comm.size()}, at::TensorOptions().dtype(type));
      comm.all_to_all(output, make(mine, type));
      BOOST_TEST_CONTEXT(label("all_to_all", type, n)) {
        MPIACCEL_CHECK_ALL(matches(read(output), want, ReduceOp::Sum, type));
      }
    }
  at::Tensor uneven = at::zeros({comm.size() + (comm.size() > 1 ? 1 : 0)});
  if (comm.size() > 1) BOOST_CHECK_THROW(comm.all_to_all_async(uneven.clone(), uneven), mpiaccel::Error);
}

BOOST_AUTO_TEST_CASE(all_gather_in_place_from_own_block) {
  auto& comm = world();
  const int64_t n = 1000;
  at::Tensor flat = at::full({n * comm.size()}, -1.0, at::kFloat);
  at::Tensor mine = flat.narrow(0, comm.rank() * n, n);
  mine.copy_(make(values(4, comm.rank(), n, at::kFloat), at::kFloat));
  comm.all_gather(flat, mine);
  std::vector<double> want;
  for (int r = 0; r < comm.size(); ++r) {
    auto block = values(4, r, n, at::kFloat);
    want.insert(want.end(), block.begin(), block.end());
  }
  MPIACCEL_CHECK_ALL(matches(read(flat), want, ReduceOp::Sum, at::kFloat));
}

BOOST_AUTO_TEST_CASE(all_gather_uneven_with_empty_blocks) {
  auto& comm = world();
  const int seed = 5;
  // Rank r contributes 3r elements (rank 0 nothing), or 1000+r for the big case.
  for (int64_t base : {int64_t{0}, int64_t{1000}})
    for (at::ScalarType type : {at::kFloat, at::kBFloat16, at::kLong, at::kByte}) {
      std::vector<int64_t> counts;
      for (int r = 0; r < comm.size(); ++r) counts.push_back(base + 3 * r);
      int64_t total = 0;
      std::vector<double> want;
      for (int r = 0; r < comm.size(); ++r) {
        auto block = values(seed, r, counts[static_cast<size_t>(r)], type);
        want.insert(want.end(), block.begin(), block.end());
        total += counts[static_cast<size_t>(r)];
      }
      at::Tensor input = make(values(seed, comm.rank(), counts[static_cast<size_t>(comm.rank())], type), type);
      at::Tensor output = at::empty({total}, at::TensorOptions().dtype(type));
      comm.all_gather_uneven(output, input, counts);
      BOOST_TEST_CONTEXT(label("all_gather_uneven", type, total)) {
        MPIACCEL_CHECK_ALL(matches(read(output), want, ReduceOp::Sum, type));
      }
    }
}

BOOST_AUTO_TEST_CASE(broadcast_every_dtype_and_size_from_last_rank) {
  auto& comm = world();
  const int root = comm.size() - 1;
  for (at::ScalarType type : kAllTypes)
    for (int64_t n : kSizes) {
      at::Tensor t = make(values(6, comm.rank(), n, type), type);
      comm.broadcast(t, root);
      BOOST_TEST_CONTEXT(label("broadcast", type, n)) {
        MPIACCEL_CHECK_ALL(matches(read(t), values(6, root, n, type), ReduceOp::Sum, type));
      }
    }
}

BOOST_AUTO_TEST_CASE(bf16_and_fp16_sums_round_to_their_own_width) {
  // Rank 0 sends 256, rank 1 sends 1, the others 0, so the exact sum is 257
  // whatever the reduction order. fp16 (11-bit significand) holds it; bf16
  // (8 bits) does not and rounds to nearest even: 256. Both stay 2 bytes.
  auto& comm = world();
  for (at::ScalarType type : {at::kBFloat16, at::kHalf}) {
    const double mine = comm.rank() == 0 ? 256.0 : comm.rank() == 1 ? 1.0 : 0.0;
    at::Tensor t = at::full({4}, mine, at::TensorOptions().dtype(type));
    comm.all_reduce(t, ReduceOp::Sum);
    const double want = comm.size() == 1 ? 256.0 : type == at::kHalf ? 257.0 : 256.0;
    BOOST_TEST_CONTEXT(c10::toString(type)) {
      MPIACCEL_CHECK_ALL(read(t) == std::vector<double>(4, want));
      MPIACCEL_CHECK_ALL(t.scalar_type() == type);
    }
  }
}

BOOST_AUTO_TEST_CASE(bf16_sum_is_the_rounded_float_sum_bit_for_bit) {
  // The vectorised bf16 sum against LibTorch's own rounding, on random values
  // of every magnitude plus inf, -inf and NaN. Two contributions (ranks 0 and
  // 1, the others add zeros) make the expected result order-independent.
  auto& comm = world();
  if (comm.size() < 2) return;
  auto make = [](int seed) {
    at::manual_seed(seed);
    at::Tensor v = (at::randn({4096}, at::kFloat) * at::exp(at::randn({4096}) * 8)).to(at::kBFloat16);
    v[0] = INFINITY;
    v[1] = -INFINITY;
    v[2] = NAN;
    return v;
  };
  const at::Tensor a = make(11), b = make(12);
  at::Tensor t = comm.rank() == 0 ? a.clone() : comm.rank() == 1 ? b.clone() : at::zeros_like(a);
  comm.all_reduce(t, ReduceOp::Sum);
  const at::Tensor want = (a.to(at::kFloat) + b.to(at::kFloat)).to(at::kBFloat16);
  // NaN payloads and signs differ between conversions: NaN where LibTorch
  // has NaN, the exact bit pattern everywhere else.
  const at::Tensor nan = at::isnan(want);
  MPIACCEL_CHECK_ALL(at::equal(at::isnan(t), nan));
  MPIACCEL_CHECK_ALL(at::equal(t.view(at::kShort).masked_fill(nan, 0), want.view(at::kShort).masked_fill(nan, 0)));
}

BOOST_AUTO_TEST_CASE(barrier_and_many_async_ops_complete_in_order) {
  auto& comm = world();
  world().barrier();
  std::vector<at::Tensor> tensors;
  std::vector<mpiaccel::WorkHandle> works;
  for (int k = 0; k < 20; ++k) {
    tensors.push_back(at::full({100 + k}, static_cast<double>(comm.rank() + k), at::kDouble));
    works.push_back(comm.all_reduce_async(tensors.back(), ReduceOp::Sum));
    if (k % 5 == 0) works.push_back(comm.barrier_async());
  }
  mpiaccel::wait_all(works);
  bool ok = true;
  for (int k = 0; k < 20; ++k) {
    const double want = comm.size() * (comm.size() - 1) / 2.0 + k * comm.size();
    ok = ok && at::all(tensors[static_cast<size_t>(k)] == want).item<bool>();
  }
  MPIACCEL_CHECK_ALL(ok);
  // FIFO: each op started no earlier than its predecessor finished.
  bool ordered = true;
  for (size_t i = 1; i < works.size(); ++i)
    ordered = ordered && works[i]->started_at() >= works[i - 1]->finished_at();
  MPIACCEL_CHECK_ALL(ordered);
  MPIACCEL_CHECK_ALL(works.front()->name() == "all_reduce" && works[1]->name() == "barrier");
}

BOOST_AUTO_TEST_CASE(async_all_reduce_progresses_while_caller_only_polls) {
  // The caller never enters MPI while the op is in flight: only the comm
  // thread can complete it.
  auto& comm = world();
  at::Tensor t = at::full({4 << 20}, 1.0f, at::kFloat);  // 16 MiB
  auto work = comm.all_reduce_async(t, ReduceOp::Sum);
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int64_t spins = 0;
  while (!work->test() && std::chrono::steady_clock::now() < limit) ++spins;
  const bool completed = work->test();
  if (completed) work->wait();
  MPIACCEL_CHECK_ALL(completed);
  MPIACCEL_CHECK_ALL(at::all(t == static_cast<float>(comm.size())).item<bool>());
  const auto zero = std::chrono::steady_clock::time_point{};
  MPIACCEL_CHECK_ALL(work->started_at() != zero && work->finished_at() >= work->started_at());
  BOOST_TEST_MESSAGE("rank " << comm.rank() << " spun " << spins << " times on test()");
}

BOOST_AUTO_TEST_CASE(point_to_point_ring_every_dtype_and_size) {
  // Each rank sends to the next and receives from the previous, every
  // dtype and size, two tags per pair posted in reverse order of receipt:
  // messages match by (peer, tag), not by posting order.
  auto& comm = world();
  const int p = comm.size(), r = comm.rank();
  const int next = (r + 1) % p, previous = (r + p - 1) % p;
  bool ok = true;
  for (at::ScalarType type : kAllTypes)
    for (int64_t n : kSizes) {
      std::vector<at::Tensor> got{at::empty({n}, type), at::empty({n}, type)};
      std::vector<mpiaccel::WorkHandle> works;
      works.push_back(comm.recv_async(got[1], previous, 1, "tag 1"));
      works.push_back(comm.recv_async(got[0], previous, 0, "tag 0"));
      for (int tag = 0; tag < 2; ++tag)
        works.push_back(comm.send_async(make(values(tag, r, n, type), type), next, tag, "ring"));
      mpiaccel::wait_all(works);
      for (int tag = 0; tag < 2; ++tag)
        ok = ok && read(got[static_cast<size_t>(tag)]) == values(tag, previous, n, type);
    }
  MPIACCEL_CHECK_ALL(ok);
}

BOOST_AUTO_TEST_CASE(point_to_point_beside_collectives) {
  // A message posted on the caller's thread does not wait behind the
  // communication thread's collectives, nor they behind it.
  auto& comm = world();
  const int p = comm.size(), r = comm.rank();
  at::Tensor big = at::ones({1 << 20});
  auto reduce = comm.all_reduce_async(big, ReduceOp::Sum);
  at::Tensor got = at::empty({1000}, at::kDouble);
  auto recv = comm.recv_async(got, (r + p - 1) % p, 7, "beside an all_reduce");
  auto send = comm.send_async(at::full({1000}, static_cast<double>(r), at::kDouble), (r + 1) % p, 7, "ring");
  mpiaccel::wait_all({recv, send, reduce});
  MPIACCEL_CHECK_ALL(at::all(got == static_cast<double>((r + p - 1) % p)).item<bool>());
  MPIACCEL_CHECK_ALL(at::all(big == static_cast<float>(p)).item<bool>());
  MPIACCEL_CHECK_ALL(send->name() == "send" && recv->name() == "recv");
}

BOOST_AUTO_TEST_CASE(point_to_point_bad_arguments_throw_before_posting) {
  auto& comm = world();
  const int p = comm.size();
  MPIACCEL_CHECK_ALL(contains(error_of([&] { comm.send_async(at::zeros({4, 6}).t(), 0, 0, "x"); }),
                              "not contiguous"));
  MPIACCEL_CHECK_ALL(contains(error_of([&] { comm.recv_async(at::zeros({2}), p, 0, "x"); }),
                              "recv: peer " + std::to_string(p) + " is not a rank of this communicator"));
  MPIACCEL_CHECK_ALL(contains(error_of([&] { comm.send_async(at::zeros({2}), -1, 0, "x"); }), "send: peer -1"));
}

BOOST_AUTO_TEST_CASE(bytes_ops) {
  auto& comm = world();
  const int root = comm.size() / 2;
  const std::string mine = std::string(static_cast<size_t>(comm.rank()) * 5, 'a' + comm.rank());
  const std::string text = comm.broadcast_bytes("hello from " + std::to_string(comm.rank()), root);
  MPIACCEL_CHECK_ALL(text == "hello from " + std::to_string(root));
  const std::string binary = comm.broadcast_bytes(std::string("\0x\0", 3), 0);
  MPIACCEL_CHECK_ALL(binary == std::string("\0x\0", 3));

  const auto all = comm.all_gather_bytes(mine);  // rank 0 sends nothing
  bool all_right = static_cast<int>(all.size()) == comm.size();
  for (int r = 0; all_right && r < comm.size(); ++r)
    all_right = all[static_cast<size_t>(r)] == std::string(static_cast<size_t>(r) * 5, 'a' + r);
  MPIACCEL_CHECK_ALL(all_right);

  const auto gathered = comm.gather_bytes(mine, root);
  MPIACCEL_CHECK_ALL(comm.rank() == root ? gathered == all : gathered.empty());
}

BOOST_AUTO_TEST_CASE(scalar_reductions) {
  auto& comm = world();
  const int p = comm.size();
  MPIACCEL_CHECK_ALL(comm.all_reduce_scalar(comm.rank() + 0.5) == p * (p - 1) / 2.0 + 0.5 * p);
  MPIACCEL_CHECK_ALL(comm.all_reduce_scalar(comm.rank(), ReduceOp::Avg) == (p - 1) / 2.0);
  MPIACCEL_CHECK_ALL(comm.all_reduce_scalar(-comm.rank(), ReduceOp::Min) == -(p - 1));
  const int64_t big = int64_t{1} << 53;  // beyond double's exact integers once summed
  MPIACCEL_CHECK_ALL(comm.all_reduce_int(big + 1) == p * (big + 1));
  MPIACCEL_CHECK_ALL(comm.all_reduce_int(comm.rank(), ReduceOp::Max) == p - 1);
}

BOOST_AUTO_TEST_CASE(all_ok_fails_every_rank_with_lowest_reason) {
  auto& comm = world();
  const int p = comm.size();
  MPIACCEL_CHECK_ALL(error_of([&] { mpiaccel::all_ok(comm, true, "unused"); }).empty());

  const std::string one = error_of([&] {
    mpiaccel::all_ok(comm, comm.rank() != p - 1, "disk full on rank " + std::to_string(comm.rank()));
  });
  const std::string r = std::to_string(p - 1);
  MPIACCEL_CHECK_ALL(one == "rank " + r + ": disk full on rank " + r);

  // Every rank but 0 fails: rank 1's reason, and p-2 others.
  const std::string many = error_of([&] {
    mpiaccel::all_ok(comm, comm.rank() == 0, "bad shard " + std::to_string(comm.rank()));
  });
  if (p == 1) {
    MPIACCEL_CHECK_ALL(many.empty());
  } else if (p == 2) {
    MPIACCEL_CHECK_ALL(many == "rank 1: bad shard 1");
  } else {
    const std::string others = std::to_string(p - 2) + (p - 2 == 1 ? " other rank" : " other ranks");
    MPIACCEL_CHECK_ALL(many == "rank 1: bad shard 1 (and " + others + " failed)");
  }
}

BOOST_AUTO_TEST_CASE(split_even_odd_ranks) {
  auto& comm = world();
  const int color = comm.rank() % 2;
  // Reverse order by key: the highest world rank becomes rank 0 of its part.
  auto part = comm.split(color, -comm.rank());
  MPIACCEL_REQUIRE_ALL(part != nullptr);
  std::vector<int> members;
  for (int r = 0; r < comm.size(); ++r)
    if (r % 2 == color) members.push_back(r);
  const int expected_rank = static_cast<int>(members.end() -
                                             std::find(members.begin(), members.end(), comm.rank())) - 1;
  MPIACCEL_CHECK_ALL(part->size() == static_cast<int>(members.size()));
  MPIACCEL_CHECK_ALL(part->rank() == expected_rank);
  MPIACCEL_CHECK_ALL(part->backend() == mpiaccel::Backend::Mpi && part->timeout() == comm.timeout());
  at::Tensor t = at::full({1000}, static_cast<double>(comm.rank()), at::kDouble);
  part->all_reduce(t);
  double want = 0;
  for (int r : members) want += r;
  MPIACCEL_CHECK_ALL(at::all(t == want).item<bool>());
  // Interleaving ops on the parent and the part is safe: separate MPI_Comms.
  auto on_part = part->barrier_async();
  comm.barrier();
  on_part->wait();

  auto none = comm.split(comm.rank() == 0 ? -1 : 0, 0);
  MPIACCEL_CHECK_ALL((comm.rank() == 0) == (none == nullptr));
  MPIACCEL_CHECK_ALL(none == nullptr || none->size() == comm.size() - 1);
}

BOOST_AUTO_TEST_CASE(bad_arguments_throw_before_anything_is_enqueued) {
  auto& comm = world();
  const int p = comm.size();
  at::Tensor matrix = at::zeros({4, 6}, at::kFloat);
  MPIACCEL_CHECK_ALL(contains(error_of([&] { comm.all_reduce(matrix.t()); }), "not contiguous"));
  MPIACCEL_CHECK_ALL(contains(error_of([&] { comm.all_reduce(at::zeros({3}, at::kBool)); }),
                              "supported: float32"));
  MPIACCEL_CHECK_ALL(contains(error_of([&] { comm.all_reduce(at::Tensor()); }), "undefined"));
  MPIACCEL_CHECK_ALL(contains(error_of([&] { comm.broadcast(at::empty({3}, at::kMeta)); }),
                              "CPU tensors"));
  MPIACCEL_CHECK_ALL(contains(
      error_of([&] { comm.all_reduce(at::zeros({3}, at::kInt), ReduceOp::Avg); }), "Avg of int32"));
  MPIACCEL_CHECK_ALL(contains(
      error_of([&] { comm.reduce_scatter(at::zeros({2}), at::zeros({2 * p + 1})); }),
      "`input` has " + std::to_string(2 * p + 1) + " elements but needs " + std::to_string(2 * p)));
  MPIACCEL_CHECK_ALL(contains(
      error_of([&] { comm.all_gather(at::zeros({2 * p}, at::kDouble), at::zeros({2})); }),
      "same dtype"));
  MPIACCEL_CHECK_ALL(contains(error_of([&] { comm.broadcast(at::zeros({2}), p); }),
                              "root " + std::to_string(p)));
  MPIACCEL_CHECK_ALL(contains(
      error_of([&] { comm.all_gather_uneven(at::zeros({1}), at::zeros({1}), {1, 1, 1, 1, 1}); }),
      "one count per rank"));
  // Nothing was issued: the next collective still pairs up on every rank.
  at::Tensor t = at::ones({5});
  comm.all_reduce(t);
  MPIACCEL_CHECK_ALL(at::all(t == static_cast<float>(p)).item<bool>());
}

BOOST_AUTO_TEST_CASE(node_communicator_and_destruction_drains) {
  auto& rt = mpiaccel::test::runtime();
  at::Tensor t = at::ones({1 << 16});
  mpiaccel::WorkHandle work;
  {
    auto node = mpiaccel::make_mpi_node(rt, std::chrono::seconds(30));
    MPIACCEL_CHECK_ALL(node->size() == rt.local_size() && node->rank() == rt.local_rank());
    work = node->all_reduce_async(t, ReduceOp::Sum);
    // `node` goes away with the op possibly still queued: the destructor runs it.
  }
  MPIACCEL_CHECK_ALL(work->test());
  work->wait();
  MPIACCEL_CHECK_ALL(at::all(t == static_cast<float>(rt.local_size())).item<bool>());
}
