#include <catch2/catch.hpp>

#include <cstring>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "core/allocator.h"
#include "core/generator.h"

using namespace fathom;
using namespace fathom::autograd;

namespace {

// A dropout-like op whose mask comes from a shared generator: recomputation must replay it.
Generator g_dropout_rng(1234);

Variable noisy(const Variable& x) {
  const Tensor keep = bernoulli(x.sizes(), g_dropout_rng, 0.8, x.dtype());
  return x * Variable(keep);
}

// A small MLP-like segment: every op saves activations.
VariableList block(const Variable& w1, const Variable& w2, const VariableList& in) {
  const Variable h = gelu(in[0] * w1);
  const Variable g = tanh(noisy(h) * w2) + in[0];
  return {g};
}

struct Run {
  Tensor grad_x, grad_w1, grad_w2;
  int hook_calls = 0;
  int64_t peak_activations = 0;
};

Run run(bool use_checkpoint) {
  Generator init(5);
  const Variable x(uniform({64, 256}, init, -1, 1), true, "x");
  const Variable w1(uniform({256}, init, -1, 1), true, "w1");
  const Variable w2(uniform({256}, init, -1, 1), true, "w2");
  Run r;
  std::vector<HookHandle> hooks;
  for (const Variable& w : {w1, w2}) hooks.push_back(w.add_grad_ready_hook([&](const Variable&) { ++r.hook_calls; }));
  g_dropout_rng.set_state(1234, 0);
  allocator_for(kCPU).stats().reset_peak();
  const int64_t before = memory_snapshot()[MemoryTag::Activations].current;
  VariableList out;
  {
    MemoryTagScope tag(MemoryTag::Activations);
    VariableList h = {x};
    for (int layer = 0; layer < 4; ++layer) {
      auto segment = [&](const VariableList& in) { return block(w1, w2, in); };
      h = use_checkpoint ? checkpoint(segment, h) : segment(h);
    }
    out = h;
  }
  r.peak_activations = memory_snapshot()[MemoryTag::Activations].peak - before;
  sum(out[0]).backward();
  r.grad_x = x.grad();
  r.grad_w1 = w1.grad();
  r.grad_w2 = w2.grad();
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("checkpointing gives bit-identical gradients with less activation memory", "[autograd]") {
  // The RNG's offset is part of what a recomputation replays.
  const int state = register_checkpoint_state(
      {[] { return std::any(g_dropout_rng.offset()); },
       [](const std::any& offset) { g_dropout_rng.set_state(g_dropout_rng.seed(), std::any_cast<uint64_t>(offset)); }});
  const Run plain = run(false);
  const Run checkpointed = run(true);
  unregister_checkpoint_state(state);

  CHECK(same_bits(plain.grad_x, checkpointed.grad_x));
  CHECK(same_bits(plain.grad_w1, checkpointed.grad_w1));
  CHECK(same_bits(plain.grad_w2, checkpointed.grad_w2));
  CHECK(plain.hook_calls == 2);
  CHECK(checkpointed.hook_calls == 2);
  INFO("peak activation bytes: plain " << plain.peak_activations << ", checkpointed " << checkpointed.peak_activations);
  CHECK(checkpointed.peak_activations * 2 < plain.peak_activations);
}

TEST_CASE("a segment that changes between forward and recomputation is reported", "[autograd]") {
  const Variable x(Tensor::ones({4}), true, "x");
  int calls = 0;
  const VariableList out = checkpoint(
      [&](const VariableList& in) {
        ++calls;
        return calls == 1 ? VariableList{exp(in[0])} : VariableList{exp(exp(in[0]))};
      },
      {x});
  CHECK_THROWS_WITH(sum(out[0]).backward(), Catch::Contains("checkpoint: the segment saved 1 tensors in forward but 2 when recomputed"));
}
