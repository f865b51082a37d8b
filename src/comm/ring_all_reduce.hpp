#pragma once
// Internal: the pipelined ring all-reduce for large buffers across nodes,
// and its halves, the ring reduce-scatter and all-gather (docs/comm.md,
// "Across nodes: the pipelined ring").
//
// A reduce-scatter then an all-gather around the ring of the communicator's
// ranks (p − 1 steps each: every rank sends 2(p − 1)/p of the buffer, the
// least any all-reduce can). Each step's chunk travels in segments; a
// segment is reduced as soon as it has arrived and is at once sent on, as
// the next step's, while the rest of its chunk is still on the wire. So the
// link never waits for a whole chunk's reduction, and sending and receiving
// run at once on a full-duplex link.

#include <mpi.h>

#include <cstdint>

namespace mpiaccel::detail {

/// In place over `count` elements of `data`, on the calling thread.
/// Collective over `comm`, which no other traffic may use meanwhile (its own
/// duplicate). `op` must be commutative (sum, min, max).
void ring_all_reduce(void* data, int64_t count, int64_t element_bytes, MPI_Datatype type, MPI_Op op,
                     MPI_Comm comm, int64_t segment_bytes);

/// The reduce-scatter half alone: `input` holds size·block elements; rank r
/// gets the reduction of block r in `output` (MPI_Reduce_scatter_block's
/// contract). Each rank sends (p − 1)/p of the input.
void ring_reduce_scatter(const void* input, void* output, int64_t block, int64_t element_bytes, MPI_Datatype type,
                         MPI_Op op, MPI_Comm comm, int64_t segment_bytes);
/// The same, reducing in `data` (size·block elements), which it leaves
/// clobbered: for a caller whose input is scratch already.
void ring_reduce_scatter_in_place(void* data, void* output, int64_t block, int64_t element_bytes, MPI_Datatype type,
                                  MPI_Op op, MPI_Comm comm, int64_t segment_bytes);
/// The all-gather half alone: rank r's `block` elements of `input` land at
/// block r of every rank's `output` (size·block elements; `input` may be
/// that block already: MPI_Allgather's contract, in place or not).
void ring_all_gather(const void* input, void* output, int64_t block, int64_t element_bytes, MPI_Datatype type,
                     MPI_Comm comm, int64_t segment_bytes);

/// Segments of this size keep a 1–10 Gbit/s link busy while the one before
/// is reduced, and the number of messages small.
constexpr int64_t kRingSegmentBytes = int64_t{1} << 20;

}  // namespace mpiaccel::detail
