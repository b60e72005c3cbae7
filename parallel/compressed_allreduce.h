#pragma once
// The 1-bit compressed all-reduce with error feedback of 1-bit Adam, 0/1 Adam and 1-bit LAMB
// (Tang et al. 2021; DeepSpeed's compressed_allreduce), as a communicator-level operation.
//
// Every rank passes an f32 buffer of the same size; all end with the same approximation of its
// mean, having sent about 1/32 of the bytes of an f32 all-reduce:
//   worker: x = buffer (zero-padded) + worker error; scale s = |x|₂ / √len; signs of x
//           (sign(0) = +1) in 32-bit words; new worker error = x - s·sign(x);
//   phase 1: an all-to-all of the sign words (chunk r to rank r) and an all-gather of the scales;
//   server (rank r, chunk r): y = Σ_i s_i/n · sign_i + server error; its scale and signs, and
//           new server error = y - s_y·sign(y);
//   phase 2: an all-gather of every chunk's sign words and scale; output chunk r = s_y(r)·sign.
// So, per call and within f32 rounding,
//   output + mean(new worker errors) + new server error = mean(inputs) + mean(old worker errors)
//                                                         + old server error
// (the server error taken in its chunk). The caller owns the error buffers (one pair per tensor
// it compresses, CompressionErrors). Padding makes the length a multiple of 32·n, so every rank's
// chunk is whole words; DeepSpeed pads to n·lcm(n, 8) and packs bytes. Tensors on a GPU are
// compressed on the host (copied there and back).

#include <cstdint>
#include <vector>

#include "parallel/communicator.h"

namespace fathom::parallel {

// The padded length for `numel` elements over `world` ranks: a multiple of 32·world.
int64_t compressed_length(int64_t numel, int world);

struct CompressionErrors {
  Tensor worker;  // f32 [compressed_length]: this rank's, of the whole buffer
  Tensor server;  // f32 [compressed_length / world]: of the chunk this rank serves
  // Zeros for `numel` elements over `world` ranks, on the host.
  static CompressionErrors zeros(int64_t numel, int world);
};

// Replaces `buffer` (f32, contiguous, any device; the same numel on every rank) with the
// compressed mean over `comm`, updating `errors`. Collective.
void compressed_all_reduce(Communicator& comm, const Tensor& buffer, CompressionErrors& errors);
// Several buffers, each with its own scales and errors, in one exchange: the four collectives
// carry every buffer's part at once (what 1-bit Adam does with a model's parameters).
void compressed_all_reduce(Communicator& comm, const std::vector<Tensor>& buffers,
                           const std::vector<CompressionErrors*>& errors);

// The sign packing, exposed for its tests: bit k of word w is sign(x[32w + k]) >= 0 (so 0 maps to
// +1); x.numel() must be a multiple of 32. unpack gives ±1 times `scale`.
Tensor pack_signs(const Tensor& x);
void unpack_signs(const Tensor& words, float scale, float* out, int64_t count);

}  // namespace fathom::parallel
