#include "nn/dropout.h"

#include <atomic>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "autograd/checkpoint.h"
#include "autograd/nn_functions.h"

namespace fathom::nn {
namespace {

std::atomic<uint64_t> g_next_module_id{0};
thread_local DropoutContext t_context;
thread_local std::unordered_map<uint64_t, uint64_t> t_calls;  // stream id -> calls this step

// The context and the call counts are state a checkpoint recomputation must replay: a pipeline
// schedule runs other micro-batches' forwards (other sample indices) before this one's backward.
using DropoutState = std::pair<DropoutContext, std::unordered_map<uint64_t, uint64_t>>;
const int kCheckpointState = autograd::register_checkpoint_state(
    {[] { return std::any(DropoutState{t_context, t_calls}); },
     [](const std::any& saved) { std::tie(t_context, t_calls) = std::any_cast<DropoutState>(saved); }});

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: spreads (step, module, call) over 64 bits
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Global row index of every row of x viewed as (rows, last dim): sample b's rows are numbered
// from b's global sample index times `rows_per_sample` (the unsharded count), starting at
// `first_row` (a sequence shard's first position).
Tensor row_indices(const Tensor& x, int64_t first_row = 0, int64_t rows_per_sample = -1) {
  const int64_t width = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t rows = width == 0 ? 0 : x.numel() / width;
  Tensor out = Tensor::empty({rows}, DType::I64);
  int64_t* index = out.data<int64_t>();
  const Tensor& samples = t_context.sample_index;
  const int64_t batch = x.dim() >= 2 ? x.size(0) : 0;
  const bool by_sample = batch > 0 && rows % batch == 0;
  const int64_t local = by_sample ? rows / batch : rows;  // rows per sample here
  const int64_t whole = rows_per_sample < 0 ? local : rows_per_sample;
  if (by_sample && samples.defined() && samples.numel() == batch) {
    const std::vector<int64_t> global = samples.to_vector<int64_t>();
    for (int64_t r = 0; r < rows; ++r) index[r] = global[r / local] * whole + first_row + r % local;
  } else {
    for (int64_t r = 0; r < rows; ++r) index[r] = (r / local) * whole + first_row + r % local;
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

Variable Dropout::forward(const Variable& x) { return forward_rows(x, 0, -1); }

Variable Dropout::forward_sequence_shard(const Variable& x, int64_t first_position, int64_t sequence_length) {
  FATHOM_CHECK(x.dim() == 3 && first_position >= 0 && first_position + x.size(1) <= sequence_length,
               "Dropout: a sequence shard (B, T, C) at positions [", first_position, ", ",
               first_position + (x.dim() > 1 ? x.size(1) : 0), ") of ", sequence_length, ", got ",
               shape_str(x.sizes()));
  return forward_rows(x, first_position, sequence_length);
}

Variable Dropout::forward_rows(const Variable& x, int64_t first_row, int64_t rows_per_sample) {
  if (!is_training() || p == 0.0) return x;
  const uint64_t call = t_calls[stream_id_]++;
  const uint64_t offset = mix(mix(t_context.step) ^ (stream_id_ * 0x100000001b3ull) ^ (call << 48));
  return autograd::dropout(x, p, t_context.seed, offset, row_indices(x.data(), first_row, rows_per_sample));
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
