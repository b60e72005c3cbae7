// Per-rank model-state bytes, from the allocator's tags, against the formulas of docs/architecture.md
// ("Memory per rank") with Adam: mixed precision stage 1: 4Ψ + 12Ψ/N, stage 2: 2Ψ + 14Ψ/N,
// stage 3: 16Ψ/N; f32 stage 0: 16Ψ, stage 1: 8Ψ + 8Ψ/N, stage 2: 4Ψ + 12Ψ/N, stage 3: 16Ψ/N. Mixed-precision stage 0 is 18Ψ in
// Fathom, not 16Ψ: its gradients accumulate in fp32 beside the masters (docs/zero.md).
// Persistent buffers are measured after a step; stage 0's gradients, which each backward
// allocates and zero_grad releases, at the boundary before the step.
#include "core/allocator.h"
#include "engine/initialize.h"
#include "engine/monitor/memory_report.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "mpi_test_util.h"
#include "nn/loss.h"
#include "test_util.h"
#include "zero_partitioning.h"

using namespace fathom;
using fathom::testing::runtime;

namespace {
struct Measured {
  ModelStateBytes after_step;
  int64_t gradients_before_step = 0;
  int64_t communication_peak = 0;
  int64_t parameters = 0;  // Ψ
};

Measured train_two_steps(int stage, bool bf16, int64_t bucket) {
  const models::DecoderConfig c = models::DecoderConfig::gpt2(/*n_layer=*/2, /*n_head=*/2, /*width=*/66,
                                                              /*vocab_size=*/61, /*positions=*/16);
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 64 * 16 + 1; ++i) tokens.push_back(static_cast<uint16_t>(i * 7 % 61));
  auto data = std::make_shared<TokenDataset>(TokenDataset::from_tokens(tokens, 16, 64));
  auto model = std::make_shared<models::Decoder>(c, 1);
  Measured m;
  m.parameters = model->parameter_count();
  const std::string config = detail::concat(
      R"({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"lr": 1e-3}}, "bf16": {"enabled": )",
      bf16 ? "true" : "false", R"(}, "zero_optimization": {"stage": )", stage, R"(, "reduce_bucket_size": )", bucket,
      R"(, "allgather_bucket_size": )", bucket, R"(, "stage3_param_persistence_threshold": 0}})");
  Initialized init = initialize(Config::from_string(config), model, nullptr, data, runtime().world_ptr());
  for (const Batch& batch : *init.loader) {
    if (init.engine->global_steps() == 1) allocator_for(kCPU).stats().reset_peak();
    init.engine->backward(nn::cross_entropy((*init.engine)(autograd::Variable(batch.inputs), batch.sample_index),
                                            batch.targets, batch.loss_normaliser));
    m.gradients_before_step = model_state_bytes().gradients;
    init.engine->step();
    if (init.engine->global_steps() == 2) break;
  }
  m.after_step = model_state_bytes();
  m.communication_peak = model_state_bytes(/*peak=*/true).communication;
  if (stage == 3) fathom::testing::require_stage3_partitioned(*init.engine);
  return m;
}

// Bytes per parameter: (replicated, sharded) coefficients of Ψ and Ψ/N.
struct Formula {
  double replicated, sharded;
};
}  // namespace

TEST_CASE("model-state bytes per rank follow the ZeRO formulas within 5%", "[zero]") {
  const int n = runtime().size();
  const int64_t bucket = 20000;  // elements
  struct Case {
    int stage;
    bool bf16;
    Formula formula;
  };
  for (const Case& k : {Case{0, false, {16, 0}}, Case{1, false, {8, 8}}, Case{2, false, {4, 12}},
                        Case{3, false, {0, 16}}, Case{0, true, {18, 0}}, Case{1, true, {4, 12}},
                        Case{2, true, {2, 14}}, Case{3, true, {0, 16}}}) {
    const Measured m = train_two_steps(k.stage, k.bf16, bucket);
    const double psi = static_cast<double>(m.parameters);
    const double expected = k.formula.replicated * psi + k.formula.sharded * psi / n;
    ModelStateBytes measured = m.after_step;
    if (k.stage == 0) measured.gradients = m.gradients_before_step;
    INFO((k.bf16 ? "bf16" : "f32") << " stage " << k.stage << ", " << n << " ranks, Ψ = " << m.parameters << ": "
                                   << format_model_state_bytes(measured) << "; formula " << expected << " B");
    CHECK(std::abs(static_cast<double>(measured.model_states()) - expected) <= 0.05 * expected);
    // Communication buffers are bounded by the bucket sizes, never a whole gradient: at most two
    // reduce buckets in flight, each with its input and received part and (16-bit) their f32
    // staging copies; an all-gather piece and its output are smaller.
    const int64_t element = k.bf16 ? 2 : 4;
    CHECK(m.communication_peak <= 2 * bucket * (2 * element + (k.bf16 ? 8 : 0)));
    CHECK(m.after_step.communication == 0);
  }
}
