#pragma once
// HookHandle: owns one installed hook and removes it when destroyed (RAII).
//
//   autograd::HookHandle h = weight.add_grad_ready_hook(...);   // installed
//   h.reset();                                                   // removed (or when h dies)
//
// Whoever installs hooks on objects that outlive it (an engine on a user's model) keeps the
// handles as members, so destroying it leaves nothing behind that points at freed memory.
// Handles are move-only; removing a hook whose target is already gone is a no-op.

#include <functional>
#include <utility>

namespace fathom::autograd {

class [[nodiscard]] HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remove) : remove_(std::move(remove)) {}
  HookHandle(HookHandle&& other) noexcept : remove_(std::exchange(other.remove_, nullptr)) {}
  HookHandle& operator=(HookHandle&& other) noexcept {
    if (this != &other) {
      reset();
      remove_ = std::exchange(other.remove_, nullptr);
    }
    return *this;
  }
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  ~HookHandle() { reset(); }

  // Removes the hook now.
  void reset() {
    if (auto remove = std::exchange(remove_, nullptr)) remove();
  }
  bool active() const { return static_cast<bool>(remove_); }

 private:
  std::function<void()> remove_;
};

}  // namespace fathom::autograd
