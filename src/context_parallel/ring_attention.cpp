// Ring attention on zigzag shards (context_parallel.hpp): key/value blocks
// travel around the cp group; each rank merges the partial results of its
// queries by log-sum-exp. Backward passes the blocks around again, with
// their gradients travelling beside them back to the rank that owns them.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "context_parallel/block_attention.hpp"
#include "context_parallel/ring_attention.hpp"
#include "context_parallel/ring_pass.hpp"
#include "context_parallel/zigzag_chunks.hpp"
#include "mpiaccel/comm.hpp"
#include "tensor_parallel/group_capsule.hpp"

namespace mpiaccel::cp::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using GroupCapsule = tp::detail::GroupCapsule;

// One block product of a ring step: this rank's query half (0: its early
// chunk, 1: its late one) against a half of the key/value block it holds.
struct BlockPair {
  int query_half;
  int key_half;
  bool causal;  // the two halves are the same chunk: the diagonal
};

// The pairs rank `rank` computes against the block of rank `source`: a key
// chunk before the query chunk in full, the same chunk causally, a later
// one not at all.
std::vector<BlockPair> pairs_against(int rank, int source, int size) {
  std::vector<BlockPair> pairs;
  for (int qh = 0; qh < 2; ++qh)
    for (int kh = 0; kh < 2; ++kh) {
      const int64_t query = chunk_of(rank, qh, size), key = chunk_of(source, kh, size);
      if (key <= query) pairs.push_back({qh, kh, key == query});
    }
  return pairs;
}

at::Tensor half_of(const at::Tensor& x, int half) {
  const int64_t length = x.size(-2) / 2;
  return x.narrow(-2, half * length, length);
}

std::string step_name(int step, const char* what) { return "cp ring step " + std::to_string(step) + ": " + what; }

// The running merge of one query half's partial results.
struct Merged {
  at::Tensor out;  // float32
  at::Tensor lse;

  void add(const Partial& p) {
    const at::Tensor out_p = p.out.to(at::kFloat), lse_p = p.lse.to(at::kFloat);
    if (!out.defined()) {
      out = out_p;
      lse = lse_p;
      return;
    }
    const at::Tensor total = at::logaddexp(lse, lse_p);
    out = out * at::exp(lse - total).unsqueeze(-1) + out_p * at::exp(lse_p - total).unsqueeze(-1);
    lse = total;
  }
};

struct RingAttention : torch::autograd::Function<RingAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            c10::intrusive_ptr<GroupCapsule> capsule) {
    Communicator& group = *capsule->group;
    const int size = group.size(), rank = group.rank();
    const int64_t n_rep = q.size(1) / k.size(1);  // key/value heads travel unrepeated
    std::array<Merged, 2> merged;
    at::Tensor kv = at::stack({k, v}).contiguous();
    for (int step = 0; step < size; ++step) {
      std::optional<RingPass> pass;
      if (step + 1 < size) pass.emplace(group, kv, step, step_name(step, "keys and values"));
      const int source = (rank - step + size) % size;
      for (const BlockPair& pair : pairs_against(rank, source, size)) {
        const int kh = pair.key_half;
        merged[pair.query_half].add(block_attention(half_of(q, pair.query_half),
                                                    repeat_heads(half_of(kv[0], kh), n_rep),
                                                    repeat_heads(half_of(kv[1], kh), n_rep), pair.causal));
      }
      if (pass) kv = pass->wait();
    }
    const at::Tensor out = at::cat({merged[0].out, merged[1].out}, -2).to(q.scalar_type());
    const at::Tensor lse = at::cat({merged[0].lse, merged[1].lse}, -1);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["group"] = at::IValue::make_capsule(std::move(capsule));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Communicator& group = *GroupCapsule::from(ctx);
    const int size = group.size(), rank = group.rank();
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const at::Tensor dout = grads[0].contiguous();
    const int64_t n_rep = q.size(1) / k.size(1);
    at::Tensor dq = at::zeros(q.sizes(), q.options().dtype(at::kFloat));
    at::Tensor kv = at::stack({k, v}).contiguous();
    std::optional<RingPass> gradients_pass;  // the gradients of the block held now, from the ranks before
    for (int step = 0; step < size; ++step) {
      std::optional<RingPass> pass;
      if (step + 1 < size) pass.emplace(group, kv, step, step_name(step, "keys and values (backward)"));
      const int source = (rank - step + size) % size;
      // This block's gradients so far (the ranks before added theirs), and this rank's added in place.
      at::Tensor dkv = gradients_pass ? gradients_pass->wait() : at::zeros(kv.sizes(), kv.options().dtype(at::kFloat));
      for (const BlockPair& pair : pairs_against(rank, source, size)) {
        const int qh = pair.query_half, kh = pair.key_half;
        const BlockGrads g = block_attention_backward(
            half_of(dout, qh), half_of(q, qh), repeat_heads(half_of(kv[0], kh), n_rep),
            repeat_heads(half_of(kv[1], kh), n_rep), half_of(out, qh), half_of(lse.unsqueeze(-1), qh).squeeze(-1),
            pair.causal);
        half_of(dq, qh).add_(g.dq.to(at::kFloat));
        half_of(dkv[0], kh).add_(sum_repeated_heads(g.dk.to(at::kFloat), n_rep));
        half_of(dkv[1], kh).add_(sum_repeated_heads(g.dv.to(at::kFloat), n_rep));
      }
      gradients_pass.emplace(group, dkv, size + step, step_name(step, "key and value gradients"));
      if (pass) kv = pass->wait();
    }
    const at::Tensor own = gradients_pass->wait();  // every rank's share of this rank's block
    return {dq.to(q.scalar_type()), own[0].to(k.scalar_type()), own[1].to(v.scalar_type()), at::Tensor()};
  }
};

}  // namespace

at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::shared_ptr<Communicator>& group) {
  return RingAttention::apply(q, k, v, GroupCapsule::of(group));
}

}  // namespace mpiaccel::cp::detail
