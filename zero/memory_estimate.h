#pragma once
// Per-rank model-state memory under ZeRO: the bytes one data-parallel rank holds for parameters,
// gradients, fp32 master weights and optimizer states, before any activation or working buffer.
// The counterpart of DeepSpeed's estimate_zero{2,3}_model_states_mem_needs (docs/zero_memory.md
// compares the two).
//
// Per parameter, with Ψ parameters and N ranks: parameters take 2 bytes (bf16/fp16) or 4 (f32);
// mixed precision adds a 4-byte fp32 master; the optimizer keeps K bytes of fp32 state (Adam,
// AdamW and Lamb 8, SGD with momentum 4, Lion 4, plain SGD 0). Stage 1 shards masters and
// states, stage 2 also the gradients, stage 3 also the parameters. Gradients are in the
// parameters' dtype, except in mixed precision at stage 0, where Fathom accumulates them in
// fp32 beside the masters, and at stages 1-3 with gradient accumulation over micro-steps
// (fp32_gradient_accumulation), where they are fp32 too. With Adam and no accumulation:
//
//   stage   bf16/fp16 mixed     f32
//   0       18Ψ                 16Ψ
//   1       4Ψ + 12Ψ/N          8Ψ + 8Ψ/N
//   2       2Ψ + 14Ψ/N          4Ψ + 12Ψ/N
//   3       16Ψ/N               16Ψ/N
//
// "Ψ/N" is really ceil(Ψ/N): a sharded buffer is padded to a multiple of N so every rank holds
// an equal shard (zero::Partition), which is why per-rank bytes can exceed Ψ/N slightly.
//
// With offload_optimizer the sharded optimizer (fp32 masters and states) lives in host memory, as
// DeepSpeed's offload_optimizer: {device: cpu}; parameters and gradients stay on the device.

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace fathom::zero {

enum class OptimizerKind { Adam, AdamW, Lamb, SGD, SGDMomentum, Lion, OneBitAdam, ZeroOneAdam, OneBitLamb };

// "Adam", "AdamW", "Lamb", "SGD", "SGD-momentum" (or "momentum"), "Lion", "OneBitAdam", "ZeroOneAdam",
// "OneBitLamb"; case-insensitive.
OptimizerKind parse_optimizer_kind(const std::string& name);
const char* optimizer_kind_name(OptimizerKind kind);
// Bytes of fp32 optimizer state per parameter (K): Adam/AdamW/Lamb 8, SGD-momentum 4, Lion 4, SGD 0,
// OneBitAdam 12 (its moments and the worker error buffer; the server error adds 4/n more),
// ZeroOneAdam 16 (and the weights at its last synchronisation), OneBitLamb 24 (three moments, the worker error,
// and during the step the flat compressed buffer and the momenta before the gradient).
int64_t optimizer_state_bytes(OptimizerKind kind);

struct ModelStateConfig {
  int64_t parameters = 0;      // Ψ
  int world_size = 1;          // N, the data-parallel ranks the states are sharded over
  DType dtype = DType::BF16;   // the model's dtype: f32, or bf16/f16 for mixed precision
  int stage = 0;               // ZeRO stage 0-3
  OptimizerKind optimizer = OptimizerKind::Adam;
  bool offload_optimizer = false;  // masters and optimizer states in host memory (stages 1-3)
  // Mixed precision, stages 1-3: gradients accumulated over several micro-steps are fp32
  // (gradient_accumulation_steps > 1), so that summing micro-batches does not round in 16 bits.
  bool fp32_gradient_accumulation = false;
};

// Bytes per rank. device + host == total.
struct ModelStateEstimate {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t master_weights = 0;    // fp32 copies; 0 in pure f32
  int64_t optimizer_states = 0;
  int64_t device = 0;
  int64_t host = 0;              // masters + optimizer states when offloaded, else 0
  int64_t total = 0;
};

// Elements of a sharded buffer one rank holds: ceil(numel / world_size), zero::Partition's shard.
int64_t shard_elements(int64_t numel, int world_size);

// Throws fathom::Error on a bad config (Ψ <= 0, N <= 0, stage outside 0-3, a non-float dtype,
// offload at stage 0).
ModelStateEstimate estimate_model_states(const ModelStateConfig& config);

}  // namespace fathom::zero
