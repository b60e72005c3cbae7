#include "nn/dropout.h"

#include <atomic>
#include <unordered_map>

#include "autograd/checkpoint.h"
#include "autograd/nn_functions.h"

namespace fathom::nn {
namespace {

std::atomic<uint64_t> g_next_module_id{0};
thread_local DropoutContext t_context;
thread_local std::unordered_map<uint64_t, uint64_t> t_calls;  // stream id -> calls this step

// The call counts are state a checkpoint recomputation must replay.
const int kCheckpointState = autograd::register_checkpoint_state(
    {[] { return std::any(t_calls); },
     [](const std::any& saved) { t_calls = std::any_cast<std::unordered_map<uint64_t, uint64_t>>(saved); }});

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: spreads (step, module, call) over 64 bits
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Global row index of every row of x viewed as (rows, last dim).
Tensor row_indices(const Tensor& x) {
  const int64_t width = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t rows = width == 0 ? 0 : x.numel() / width;
  Tensor out = Tensor::empty({rows}, DType::I64);
  int64_t* index = out.data<int64_t>();
  const Tensor& samples = t_context.sample_index;
  const int64_t batch = x.dim() >= 2 ? x.size(0) : 0;
  if (samples.defined() && batch > 0 && samples.numel() == batch && rows % batch == 0) {
    const std::vector<int64_t> global = samples.to_vector<int64_t>();
    const int64_t per_sample = rows / batch;
    for (int64_t r = 0; r < rows; ++r) index[r] = global[r / per_sample] * per_sample + r % per_sample;
  } else {
    for (int64_t r = 0; r < rows; ++r) index[r] = r;
  }
  return x.device().is_cpu() ? out : out.to(x.device());  // the kernel reads it beside x
}

}  // namespace

void set_dropout_context(DropoutContext context) {
  t_context = std::move(context);
  t_calls.clear();
  (void)kCheckpointState;
}

const DropoutContext& dropout_context() { return t_context; }

Dropout::Dropout(double p_) : p(p_), stream_id_(g_next_module_id++) {
  FATHOM_CHECK(p >= 0.0 && p < 1.0, "Dropout: p must be in [0, 1), got ", p);
}

Variable Dropout::forward(const Variable& x) {
  if (!is_training() || p == 0.0) return x;
  const uint64_t call = t_calls[stream_id_]++;
  const uint64_t offset = mix(mix(t_context.step) ^ (stream_id_ * 0x100000001b3ull) ^ (call << 48));
  return autograd::dropout(x, p, t_context.seed, offset, row_indices(x.data()));
}

void assign_dropout_streams(Module& root) {
  for (const auto& [name, module] : root.named_modules()) {
    auto* dropout = dynamic_cast<Dropout*>(module);
    if (dropout == nullptr) continue;
    uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a of the dotted name
    for (unsigned char ch : name) hash = (hash ^ ch) * 0x100000001b3ull;
    dropout->set_stream_id(hash);
  }
}

}  // namespace fathom::nn
