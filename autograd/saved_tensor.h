#pragma once
// A tensor a backward node keeps from its forward, with the checks that make reuse safe.
//
// - The storage's version is recorded when saved; if an in-place op changes the tensor before
//   backward reads it, backward fails naming the node and the tensor instead of computing a
//   wrong gradient.
// - A leaf Variable (a parameter) is saved as the Variable, and backward reads its current
//   data: ZeRO-3 may release the parameter after forward and gather it again (set_data or
//   refill) before backward. Neither counts as a modification.
// - Saved-tensor hooks (a thread-local stack) can replace what is kept: activation
//   checkpointing keeps nothing and recomputes the tensor when backward asks for it. Hooks
//   apply to every saved tensor, parameters included.

#include <functional>
#include <memory>
#include <string>

#include "autograd/variable.h"

namespace fathom::autograd {

struct SavedTensorHooks {
  std::function<std::shared_ptr<void>(const Tensor&)> pack;
  std::function<Tensor(const std::shared_ptr<void>&)> unpack;
};

// Installs hooks for tensors saved on this thread while the guard lives (innermost wins).
class SavedTensorHooksGuard {
 public:
  explicit SavedTensorHooksGuard(SavedTensorHooks hooks);
  ~SavedTensorHooksGuard();
  SavedTensorHooksGuard(const SavedTensorHooksGuard&) = delete;
  SavedTensorHooksGuard& operator=(const SavedTensorHooksGuard&) = delete;
};

class SavedTensor {
 public:
  SavedTensor() = default;
  // `variable` (optional): the Variable `tensor` came from; leaves are saved by reference.
  SavedTensor(const Tensor& tensor, const Variable& variable = Variable());
  // The saved tensor; throws if it was modified in place since it was saved.
  Tensor unpack(const std::string& node, const std::string& what) const;
  bool defined() const { return tensor_.defined() || leaf_ != nullptr || packed_ != nullptr; }
  void reset();

 private:
  Tensor tensor_;
  std::shared_ptr<VariableImpl> leaf_;
  std::weak_ptr<Storage> storage_;  // the storage whose version was recorded (not kept alive)
  uint64_t version_ = 0;
  bool freed_ = false;
  std::shared_ptr<void> packed_;
  std::function<Tensor(const std::shared_ptr<void>&)> unpack_;
};

}  // namespace fathom::autograd
