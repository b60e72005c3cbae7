#include "autograd/engine.h"

#include <map>
#include <queue>
#include <unordered_map>

#include "kernels/elementwise.h"

namespace fathom::autograd {
namespace {

struct BackwardState {
  std::vector<std::function<void()>> queued_callbacks;
};
thread_local BackwardState* t_current = nullptr;
thread_local std::map<int, std::function<void()>> t_post_backward_callbacks;
thread_local int t_next_callback_id = 0;

// Number of edges pointing at each node reachable from the roots.
std::unordered_map<Node*, int> count_dependencies(const std::vector<Node*>& roots) {
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack = roots;
  std::unordered_map<Node*, bool> seen;
  for (Node* root : roots) seen[root] = true;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& edge : node->next_edges()) {
      if (!edge.valid()) continue;
      ++dependencies[edge.node.get()];
      if (!seen[edge.node.get()]) {
        seen[edge.node.get()] = true;
        stack.push_back(edge.node.get());
      }
    }
  }
  return dependencies;
}

// Adds `grad` into slot `index` of a node's incoming gradients.
void accumulate_into(TensorList& slots, uint32_t index, Tensor grad) {
  if (!grad.defined()) return;
  Tensor& slot = slots[index];
  if (!slot.defined()) {
    slot = std::move(grad);
  } else if (slot.storage().use_count() == 1 && slot.is_contiguous()) {
    add_(slot, grad);  // we own it: add in place
  } else {
    slot = add(slot, grad);
  }
}

struct ReadyOrder {  // newest node first
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence_nr() < b->sequence_nr();
  }
};

// The backward pass; `split` non-null (backward_deferring): the weight gradients wait in it.
void run_backward(const VariableList& outputs, const TensorList& grad_outputs, bool retain_graph,
                  DeferredAccumulation* split, const VariableList* now);
}  // namespace

void backward(const VariableList& outputs, const TensorList& grad_outputs, bool retain_graph) {
  run_backward(outputs, grad_outputs, retain_graph, nullptr, nullptr);
}

void backward_deferring(const VariableList& outputs, const TensorList& grad_outputs, const VariableList& now,
                        DeferredAccumulation& deferred) {
  run_backward(outputs, grad_outputs, false, &deferred, &now);
}

// B's side of the split, where run_backward can reach DeferredAccumulation's lists.
struct DeferredParts {
  static void hold_leaf(DeferredAccumulation& d, std::shared_ptr<Node> node, TensorList grads) {
    d.leaves_.emplace_back(std::move(node), std::move(grads));
  }
  static void hold_part(DeferredAccumulation& d, std::shared_ptr<Node> node, TensorList grads, std::vector<bool> wanted) {
    d.parts_.push_back({std::move(node), std::move(grads), std::move(wanted)});
  }
};

void DeferredAccumulation::run() {
  FATHOM_CHECK(t_current == nullptr, "DeferredAccumulation::run: called from inside a backward");
  BackwardState state;
  t_current = &state;  // hooks may queue callbacks, as in a backward
  try {
    // Each parameter's gradient summed over everything that feeds it, then accumulated once.
    std::vector<std::shared_ptr<Node>> order;
    std::unordered_map<Node*, TensorList> incoming;
    const auto arrive = [&](const std::shared_ptr<Node>& leaf, uint32_t slot, Tensor grad) {
      auto [it, first] = incoming.try_emplace(leaf.get(), TensorList(leaf->num_outputs()));
      if (first) order.push_back(leaf);
      accumulate_into(it->second, slot, std::move(grad));
    };
    for (auto& [leaf, grads] : leaves_)
      for (size_t k = 0; k < grads.size(); ++k) arrive(leaf, static_cast<uint32_t>(k), std::move(grads[k]));
    for (Part& part : parts_) {
      TensorList grads = part.node->apply_part(part.grad_outputs, part.wanted);
      part.node->release_saved();
      const std::vector<Edge>& edges = part.node->next_edges();
      for (size_t i = 0; i < edges.size() && i < grads.size(); ++i)
        if (part.wanted[i]) arrive(edges[i].node, edges[i].input_nr, std::move(grads[i]));
    }
    leaves_.clear();
    parts_.clear();
    for (const std::shared_ptr<Node>& leaf : order) {
      TensorList grads = std::move(incoming[leaf.get()]);
      for (const NodePreHook& hook : leaf->pre_hooks()) hook(grads);
      leaf->apply(std::move(grads));
    }
    for (size_t i = 0; i < state.queued_callbacks.size(); ++i) state.queued_callbacks[i]();
  } catch (...) {
    t_current = nullptr;
    throw;
  }
  t_current = nullptr;
}

namespace {
// A parameter's accumulator: an AccumulateGrad whose leaf is not among `now`.
bool deferred_leaf(const Node& node, const VariableList& now) {
  const auto* accumulate = dynamic_cast<const AccumulateGrad*>(&node);
  if (accumulate == nullptr) return false;
  for (const Variable& v : now)
    if (v.impl() == accumulate->leaf()) return false;
  return true;
}

void run_backward(const VariableList& outputs, const TensorList& grad_outputs, bool retain_graph,
                  DeferredAccumulation* split, const VariableList* now) {
  FATHOM_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "backward: ", outputs.size(),
               " outputs but ", grad_outputs.size(), " gradients");
  FATHOM_CHECK(t_current == nullptr, "backward: called from inside another backward on the same thread");

  std::unordered_map<Node*, TensorList> incoming;
  std::vector<std::shared_ptr<Node>> roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Variable& out = outputs[i];
    FATHOM_CHECK(out.defined(), "backward: output ", i, " is undefined");
    FATHOM_CHECK(out.requires_grad(), "backward: output ", i,
                 " does not require grad (no input requires grad, or it was computed under NoGradGuard)");
    Tensor grad = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!grad.defined()) {
      FATHOM_CHECK(out.numel() == 1, "backward: output ", i, " has shape ", shape_str(out.sizes()),
                   "; a gradient is implicit only for one-element outputs, pass grad_outputs");
      grad = Tensor::ones(out.sizes(), out.dtype(), out.device());
    }
    FATHOM_CHECK(grad.sizes() == out.sizes(), "backward: gradient ", i, " has shape ", shape_str(grad.sizes()),
                 " but the output has shape ", shape_str(out.sizes()));
    const Edge edge = out.gradient_edge();
    TensorList& slots = incoming[edge.node.get()];
    slots.resize(edge.node->num_outputs());
    accumulate_into(slots, edge.input_nr, grad);
    roots.push_back(edge.node);
  }

  std::vector<Node*> root_pointers;
  for (const auto& root : roots) root_pointers.push_back(root.get());
  std::unordered_map<Node*, int> dependencies = count_dependencies(root_pointers);

  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, ReadyOrder> ready;
  std::unordered_map<Node*, bool> queued;
  for (const auto& root : roots)
    if (dependencies[root.get()] == 0 && !queued[root.get()]) {
      queued[root.get()] = true;
      ready.push(root);
    }

  BackwardState state;
  t_current = &state;
  try {
    while (!ready.empty()) {
      std::shared_ptr<Node> node = ready.top();
      ready.pop();
      TensorList grads = std::move(incoming[node.get()]);
      incoming.erase(node.get());
      grads.resize(node->num_outputs());
      for (const NodePreHook& hook : node->pre_hooks()) hook(grads);
      const std::vector<Edge>& edges = node->next_edges();
      TensorList input_grads;
      if (split != nullptr && deferred_leaf(*node, *now)) {
        DeferredParts::hold_leaf(*split, node, std::move(grads));
        continue;  // a leaf: no edges to follow
      }
      // The inputs that are parameters: their gradients wait for W when the node can leave them out.
      std::vector<bool> to_parameter(edges.size(), false);
      bool feeds_parameter = false;
      if (split != nullptr && node->splittable())
        for (size_t i = 0; i < edges.size(); ++i) {
          to_parameter[i] = edges[i].valid() && deferred_leaf(*edges[i].node, *now);
          feeds_parameter = feeds_parameter || to_parameter[i];
        }
      if (feeds_parameter) {
        std::vector<bool> rest(edges.size());
        for (size_t i = 0; i < edges.size(); ++i) rest[i] = edges[i].valid() && !to_parameter[i];
        input_grads = node->apply_part(grads, rest);  // keeps what it saved, for W
        DeferredParts::hold_part(*split, node, std::move(grads), std::move(to_parameter));
      } else {
        input_grads = node->apply(std::move(grads));
        if (!retain_graph) node->release_saved();
      }
      FATHOM_CHECK(input_grads.size() == edges.size() || input_grads.empty(), "backward: node ", node->name(),
                   " returned ", input_grads.size(), " gradients for ", edges.size(), " inputs");
      for (size_t i = 0; i < edges.size(); ++i) {
        const Edge& edge = edges[i];
        if (!edge.valid()) continue;
        if (i < input_grads.size() && input_grads[i].defined()) {
          TensorList& slots = incoming[edge.node.get()];
          slots.resize(edge.node->num_outputs());
          accumulate_into(slots, edge.input_nr, std::move(input_grads[i]));
        }
        if (--dependencies[edge.node.get()] == 0) ready.push(edge.node);
      }
    }
    // Index loop: a callback may queue further callbacks.
    for (size_t i = 0; i < state.queued_callbacks.size(); ++i) state.queued_callbacks[i]();
    for (auto& [id, callback] : t_post_backward_callbacks) callback();
  } catch (...) {
    t_current = nullptr;
    throw;
  }
  t_current = nullptr;
}
}  // namespace

void queue_backward_callback(std::function<void()> callback) {
  FATHOM_CHECK(t_current != nullptr, "queue_backward_callback: no backward is running on this thread");
  t_current->queued_callbacks.push_back(std::move(callback));
}

int add_post_backward_callback(std::function<void()> callback) {
  const int id = t_next_callback_id++;
  t_post_backward_callbacks[id] = std::move(callback);
  return id;
}

void remove_post_backward_callback(int id) { t_post_backward_callbacks.erase(id); }

bool in_backward() { return t_current != nullptr; }

}  // namespace fathom::autograd
