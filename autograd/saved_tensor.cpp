#include "autograd/saved_tensor.h"

#include <vector>

namespace fathom::autograd {
namespace {
thread_local std::vector<SavedTensorHooks> t_hooks;
}

SavedTensorHooksGuard::SavedTensorHooksGuard(SavedTensorHooks hooks) { t_hooks.push_back(std::move(hooks)); }
SavedTensorHooksGuard::~SavedTensorHooksGuard() { t_hooks.pop_back(); }

SavedTensor::SavedTensor(const Tensor& tensor, const Variable& variable) {
  if (!tensor.defined()) return;
  // Hooks come first: a checkpointed segment must keep nothing, parameters included (its
  // recomputation reads them again, after any ZeRO-3 gather).
  if (!t_hooks.empty()) {
    packed_ = t_hooks.back().pack(tensor);
    unpack_ = t_hooks.back().unpack;
    return;
  }
  if (variable.defined() && variable.is_leaf()) leaf_ = variable.impl();
  else tensor_ = tensor;
  storage_ = tensor.storage();
  version_ = tensor.version();
}

Tensor SavedTensor::unpack(const std::string& node, const std::string& what) const {
  if (packed_) return unpack_(packed_);
  FATHOM_CHECK(!freed_, "backward of ", node, ": ", what,
               " was already freed; call backward(..., retain_graph=true) to run backward twice");
  const Tensor tensor = leaf_ ? leaf_->data : tensor_;
  if (tensor.defined() && tensor.storage() == storage_.lock()) {
    FATHOM_CHECK(tensor.version() == version_, "backward of ", node, ": ", what,
                 " was modified by an in-place operation after it was saved (version ", tensor.version(),
                 ", saved at version ", version_, "); clone() it before modifying it, or use the out-of-place op");
  }
  return tensor;
}

void SavedTensor::reset() {
  freed_ = defined();
  tensor_ = Tensor();
  leaf_.reset();
  packed_.reset();
  unpack_ = nullptr;
}

}  // namespace fathom::autograd
