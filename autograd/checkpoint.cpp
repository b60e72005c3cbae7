#include "autograd/checkpoint.h"

#include <map>
#include <memory>
#include <mutex>

#include "autograd/grad_mode.h"
#include "autograd/saved_tensor.h"

namespace fathom::autograd {
namespace {

std::mutex g_states_mutex;
std::map<int, CheckpointState> g_states;
int g_next_state_id = 0;

struct Frame {
  Segment segment;
  VariableList inputs;
  std::map<int, std::any> states;  // replayed before recomputing
  size_t saved_in_forward = 0;
  bool recomputed = false;
  std::vector<Tensor> tensors;  // what the recomputation saved, in order
};

thread_local int g_recomputing = 0;

void recompute(Frame& frame) {
  struct Recomputing {
    Recomputing() { ++g_recomputing; }
    ~Recomputing() { --g_recomputing; }
  } recomputing;
  {
    std::lock_guard<std::mutex> lock(g_states_mutex);
    for (const auto& [id, value] : frame.states)
      if (g_states.count(id)) g_states[id].restore(value);
  }
  // Fresh leaves stand in for the inputs, so the recomputed graph is separate and is dropped.
  VariableList inputs;
  for (const Variable& input : frame.inputs) inputs.push_back(Variable(input.data(), input.requires_grad()));
  const bool grad_was_enabled = is_grad_enabled();
  set_grad_enabled(true);
  try {
    SavedTensorHooksGuard capture({[&frame](const Tensor& t) {
                                     frame.tensors.push_back(t);
                                     return std::shared_ptr<void>();
                                   },
                                   [](const std::shared_ptr<void>&) -> Tensor {
                                     FATHOM_FAIL("checkpoint: a recomputed tensor was unpacked during recomputation");
                                   }});
    frame.segment(inputs);
  } catch (...) {
    set_grad_enabled(grad_was_enabled);
    throw;
  }
  set_grad_enabled(grad_was_enabled);
  FATHOM_CHECK(frame.tensors.size() == frame.saved_in_forward, "checkpoint: the segment saved ",
               frame.saved_in_forward, " tensors in forward but ", frame.tensors.size(),
               " when recomputed; a checkpointed segment must run the same ops both times");
  frame.recomputed = true;
}

}  // namespace

bool is_recomputing() { return g_recomputing > 0; }

VariableList checkpoint(const Segment& segment, const VariableList& inputs) {
  auto frame = std::make_shared<Frame>();
  frame->segment = segment;
  frame->inputs = inputs;
  {
    std::lock_guard<std::mutex> lock(g_states_mutex);
    for (const auto& [id, state] : g_states) frame->states[id] = state.save();
  }
  if (!is_grad_enabled()) return segment(inputs);  // nothing will be saved anyway
  SavedTensorHooksGuard hooks(
      {[frame](const Tensor&) { return std::static_pointer_cast<void>(std::make_shared<size_t>(frame->saved_in_forward++)); },
       [frame](const std::shared_ptr<void>& handle) {
         if (!frame->recomputed) recompute(*frame);
         return frame->tensors[*std::static_pointer_cast<size_t>(handle)];
       }});
  return segment(inputs);
}

int register_checkpoint_state(CheckpointState state) {
  std::lock_guard<std::mutex> lock(g_states_mutex);
  g_states[g_next_state_id] = std::move(state);
  return g_next_state_id++;
}

void unregister_checkpoint_state(int id) {
  std::lock_guard<std::mutex> lock(g_states_mutex);
  g_states.erase(id);
}

}  // namespace fathom::autograd
