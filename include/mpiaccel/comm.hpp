#pragma once
// Collective communication on torch tensors, behind one interface with two
// backends chosen at build time: MPI (CPU tensors) and NCCL (CUDA tensors,
// bootstrapped over MPI). Every collective is collective over the
// communicator: every rank calls it, in the same order.
//
// Every op exists in an async form returning a Work handle and a blocking form
// (async + wait). Async ops run on the communicator's communication thread, so
// they progress while the caller computes (Open MPI does not progress
// non-blocking collectives on its own). An op that has not completed within
// the communicator's timeout aborts the job with a message naming the op, its
// bytes, the rank and the peer count: a collective never hangs.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/config_choices.hpp"

namespace mpiaccel {

class Runtime;

enum class ReduceOp { Sum, Avg, Max, Min };
const char* reduce_op_name(ReduceOp op);

/// A handle on an in-flight collective.
class Work {
 public:
  virtual ~Work() = default;
  /// True once the op has completed (non-blocking, never calls MPI).
  virtual bool test() = 0;
  /// Makes the op's result ready for what the caller does next. MPI: blocks
  /// until the op completes. NCCL: the caller's current CUDA stream waits for
  /// the op (the host goes on queueing work, as with PyTorch's
  /// ProcessGroupNCCL; reading a result on the host synchronises), except for
  /// barrier(), which blocks. Rethrows the op's error, if any. If the
  /// communicator's deadline passes first, the job is aborted (see fatal()).
  virtual void wait() = 0;
  /// The op's name ("all_reduce", ...), for logs and traces.
  virtual const std::string& name() const = 0;
  /// Steady-clock times at which the op started executing / completed
  /// (time_since_epoch zero until test() has seen it complete; for NCCL the
  /// device's times, from timing events on its stream).
  virtual std::chrono::steady_clock::time_point started_at() const = 0;
  virtual std::chrono::steady_clock::time_point finished_at() const = 0;
};
using WorkHandle = std::shared_ptr<Work>;

/// Waits for every handle in order.
void wait_all(const std::vector<WorkHandle>& works);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Backend::Mpi or Backend::Nccl (name_of() spells it).
  virtual Backend backend() const = 0;
  /// Deadline of every op of this communicator.
  virtual std::chrono::milliseconds timeout() const = 0;

  // --- tensor collectives (async). Tensors must be contiguous, on the
  // backend's device, and must stay alive until the op completes (the handle
  // keeps a reference).

  /// In place: `tensor` becomes the reduction of every rank's `tensor`.
  virtual WorkHandle all_reduce_async(at::Tensor tensor, ReduceOp op) = 0;
  /// `input` has size()·n elements, `output` n; rank r receives the reduction
  /// of block r.
  virtual WorkHandle reduce_scatter_async(at::Tensor output, at::Tensor input,
                                          ReduceOp op) = 0;
  /// `output` has size()·n elements; block r is rank r's `input` (n elements).
  virtual WorkHandle all_gather_async(at::Tensor output, at::Tensor input) = 0;
  /// Uneven all_gather: rank r contributes counts[r] elements (its `input`);
  /// `output` has sum(counts) elements, rank blocks in rank order.
  virtual WorkHandle all_gather_uneven_async(at::Tensor output, at::Tensor input,
                                             std::vector<int64_t> counts) = 0;
  /// `input` and `output` have size()·n elements each: block p of `input`
  /// goes to rank p, and block p of `output` comes from rank p (the exchange
  /// context parallelism's all-to-all variant makes around attention).
  virtual WorkHandle all_to_all_async(at::Tensor output, at::Tensor input) = 0;
  /// In place: every rank's `tensor` becomes `root`'s.
  virtual WorkHandle broadcast_async(at::Tensor tensor, int root) = 0;
  virtual WorkHandle barrier_async() = 0;

  // --- point-to-point (pipeline parallelism): only this rank and `peer`
  // take part, not the whole communicator. Non-blocking: the op starts at
  // once, on the calling thread, and progresses in later calls. A message
  // is matched by (peer, tag) in the order sent; the receiver's `tensor`
  // must have the sender's element count and dtype. wait() holds the op to
  // the communicator's deadline from the moment it was posted and, when it
  // passes, aborts the job naming `what` ("stage 1's activations of
  // microbatch 3 to stage 2"), the peer and this rank. A backend without
  // point-to-point throws Error.
  virtual WorkHandle send_async(at::Tensor tensor, int peer, int tag, const std::string& what);
  virtual WorkHandle recv_async(at::Tensor tensor, int peer, int tag, const std::string& what);

  // --- blocking forms.
  void all_reduce(at::Tensor tensor, ReduceOp op = ReduceOp::Sum);
  void reduce_scatter(at::Tensor output, at::Tensor input, ReduceOp op = ReduceOp::Sum);
  void all_gather(at::Tensor output, at::Tensor input);
  void all_gather_uneven(at::Tensor output, at::Tensor input, std::vector<int64_t> counts);
  void all_to_all(at::Tensor output, at::Tensor input);
  void broadcast(at::Tensor tensor, int root = 0);
  void barrier();

  // --- byte blobs (blocking; always on the host).
  /// Returns `root`'s `bytes` on every rank.
  virtual std::string broadcast_bytes(const std::string& bytes, int root = 0) = 0;
  /// Every rank's `bytes`, in rank order, on every rank.
  virtual std::vector<std::string> all_gather_bytes(const std::string& bytes) = 0;
  /// Every rank's `bytes` on `root` (other ranks get an empty vector).
  virtual std::vector<std::string> gather_bytes(const std::string& bytes, int root = 0) = 0;

  // --- scalars (blocking), for flags and metrics.
  double all_reduce_scalar(double value, ReduceOp op = ReduceOp::Sum);
  int64_t all_reduce_int(int64_t value, ReduceOp op = ReduceOp::Sum);

  /// A sub-communicator of the ranks passing the same `color`, ordered by
  /// `key` (MPI_Comm_split). Collective over this communicator.
  virtual std::shared_ptr<Communicator> split(int color, int key) = 0;

  /// The ranks of this communicator on this node (shared memory), in rank
  /// order: a communicator of the same kind. Collective over this
  /// communicator.
  virtual std::shared_ptr<Communicator> split_by_node() = 0;

  /// `bytes` of host memory (a uint8 tensor) that every rank of this
  /// communicator maps, for tensors all-reduced again and again (DDP's
  /// buckets). An all_reduce of a float tensor that lies inside it, at the
  /// same offset on every rank, then runs through shared memory in place
  /// instead of MPI messages (docs/comm.md). Carve tensors out of it with
  /// at::from_blob, keeping the returned tensor alive in their deleter.
  /// Returns an undefined tensor, on every rank alike, where that is not
  /// possible: NCCL, ranks on several nodes, MPIACCEL_SHM_ALLREDUCE=0, or a
  /// /dev/shm too small; allocate ordinary memory then. Collective over this
  /// communicator.
  virtual at::Tensor allocate_shared(int64_t /*bytes*/) { return at::Tensor(); }
  /// `bytes` of host memory (a uint8 tensor) that is the SAME memory on
  /// every rank: what one rank writes, every rank reads. For state that the
  /// ranks of a node would otherwise each hold an identical copy of (DDP's
  /// node-shared parameters, docs/ddp.md). Returns an undefined tensor, on
  /// every rank alike, where that is not possible: NCCL, a single rank, ranks
  /// on several nodes, or a /dev/shm too small. Collective over this
  /// communicator.
  virtual at::Tensor allocate_node_shared(int64_t /*bytes*/) { return at::Tensor(); }
};

/// Fails on every rank together: if `ok` is false on any rank, throws
/// mpiaccel::Error on every rank with "rank R: why" of the lowest failing rank
/// (and the count of others). Collective over comm.
void all_ok(Communicator& comm, bool ok, const std::string& why);

/// The MPI communicator over all ranks (its own duplicate of the world) and
/// over the ranks of this node, each with its communication thread.
std::shared_ptr<Communicator> make_mpi_world(const Runtime& runtime,
                                             std::chrono::milliseconds timeout);
std::shared_ptr<Communicator> make_mpi_node(const Runtime& runtime,
                                            std::chrono::milliseconds timeout);

/// The communicator over all ranks that a run's tensors travel on, from
/// `backend` ([distributed] backend: auto | mpi | nccl) and each rank's
/// device: MPI on CPU ranks; NCCL on GPU ranks when asked for, or under auto
/// when the build has it and every rank has a GPU of its own; otherwise MPI
/// with device<->host staging (several ranks on one GPU). A choice some rank
/// cannot run (nccl without a GPU or NCCL, or with ranks sharing a GPU) fails
/// on every rank with that rank's reason. Collective over the world.
std::shared_ptr<Communicator> make_world(const Runtime& runtime, Backend backend,
                                         std::chrono::milliseconds timeout);

/// True when this build has the NCCL communicator.
bool nccl_available();
/// "major.minor.patch" of the NCCL library linked, or "" without NCCL.
std::string nccl_version();
/// An NCCL communicator over the ranks of `bootstrap` (rank 0 creates the
/// unique id and sends it with MPI_Bcast over `bootstrap`), on CUDA device
/// `cuda_index`. Throws mpiaccel::Error in a build without NCCL. Collective.
std::shared_ptr<Communicator> make_nccl(Communicator& bootstrap, int cuda_index,
                                        std::chrono::milliseconds timeout);

}  // namespace mpiaccel
