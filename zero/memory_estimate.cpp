#include "zero/memory_estimate.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "zero/partition.h"

namespace fathom::zero {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

}  // namespace

OptimizerKind parse_optimizer_kind(const std::string& name) {
  const std::string n = lower(name);
  if (n == "adam") return OptimizerKind::Adam;
  if (n == "adamw") return OptimizerKind::AdamW;
  if (n == "lamb") return OptimizerKind::Lamb;
  if (n == "sgd") return OptimizerKind::SGD;
  if (n == "sgd-momentum" || n == "momentum") return OptimizerKind::SGDMomentum;
  if (n == "lion") return OptimizerKind::Lion;
  if (n == "onebitadam") return OptimizerKind::OneBitAdam;
  if (n == "zerooneadam") return OptimizerKind::ZeroOneAdam;
  if (n == "onebitlamb") return OptimizerKind::OneBitLamb;
  FATHOM_FAIL("unknown optimizer \"", name, "\"; use Adam, AdamW, Lamb, SGD, SGD-momentum, Lion, OneBitAdam, "
              "ZeroOneAdam or OneBitLamb");
}

const char* optimizer_kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::Adam: return "Adam";
    case OptimizerKind::AdamW: return "AdamW";
    case OptimizerKind::Lamb: return "Lamb";
    case OptimizerKind::SGD: return "SGD";
    case OptimizerKind::SGDMomentum: return "SGD-momentum";
    case OptimizerKind::Lion: return "Lion";
    case OptimizerKind::OneBitAdam: return "OneBitAdam";
    case OptimizerKind::ZeroOneAdam: return "ZeroOneAdam";
    case OptimizerKind::OneBitLamb: return "OneBitLamb";
  }
  return "?";
}

int64_t optimizer_state_bytes(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::Adam:
    case OptimizerKind::AdamW:
    case OptimizerKind::Lamb: return 8;   // exp_avg + exp_avg_sq
    case OptimizerKind::SGDMomentum:
    case OptimizerKind::Lion: return 4;   // one momentum buffer
    case OptimizerKind::SGD: return 0;
    case OptimizerKind::OneBitAdam: return 12;  // exp_avg + exp_avg_sq + the worker error buffer
    case OptimizerKind::ZeroOneAdam: return 16;  // and the weights at the last synchronisation
    // exp_avg, exp_avg_sq, exp_avg_sq_fresh, the worker error; during the step also the flat
    // compressed buffer and the momenta before the step's gradient
    case OptimizerKind::OneBitLamb: return 24;
  }
  return 0;
}

int64_t shard_elements(int64_t numel, int world_size) { return Partition(numel, world_size).shard_size(); }

ModelStateEstimate estimate_model_states(const ModelStateConfig& c) {
  FATHOM_CHECK(c.parameters > 0, "memory estimate: the parameter count must be positive, got ", c.parameters);
  FATHOM_CHECK(c.world_size >= 1, "memory estimate: the world size must be >= 1, got ", c.world_size);
  FATHOM_CHECK(c.stage >= 0 && c.stage <= 3, "memory estimate: the ZeRO stage must be 0, 1, 2 or 3, got ", c.stage);
  FATHOM_CHECK(c.dtype == DType::F32 || c.dtype == DType::BF16 || c.dtype == DType::F16,
               "memory estimate: the precision must be f32, bf16 or f16, got ", dtype_name(c.dtype));
  FATHOM_CHECK(!c.offload_optimizer || c.stage >= 1,
               "memory estimate: optimizer offload needs ZeRO stage 1, 2 or 3 (as in DeepSpeed)");

  const int64_t full = c.parameters;
  const int64_t shard = shard_elements(c.parameters, c.world_size);
  const bool mixed = c.dtype != DType::F32;
  const int64_t param_bytes = static_cast<int64_t>(element_size(c.dtype));
  // Stage 0 mixed precision accumulates gradients in fp32 beside the masters; from stage 1 on
  // the gradient that persists is the 16-bit one (full at stage 1, the rank's shard at stage 2+),
  // or fp32 when it accumulates over micro-steps.
  const bool fp32_gradients = mixed && (c.stage == 0 || c.fp32_gradient_accumulation);
  const int64_t grad_bytes = fp32_gradients ? 4 : param_bytes;

  ModelStateEstimate e;
  e.parameters = param_bytes * (c.stage >= 3 ? shard : full);
  e.gradients = grad_bytes * (c.stage >= 2 ? shard : full);
  const int64_t optimizer_elements = c.stage >= 1 ? shard : full;
  e.master_weights = mixed ? 4 * optimizer_elements : 0;
  e.optimizer_states = optimizer_state_bytes(c.optimizer) * optimizer_elements;
  e.total = e.parameters + e.gradients + e.master_weights + e.optimizer_states;
  e.host = c.offload_optimizer ? e.master_weights + e.optimizer_states : 0;
  e.device = e.total - e.host;
  return e;
}

}  // namespace fathom::zero
