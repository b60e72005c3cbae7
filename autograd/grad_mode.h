#pragma once
// Whether ops record a backward graph on this thread. NoGradGuard turns recording off for a
// scope (inference, optimizer updates, parameter initialisation).

namespace fathom::autograd {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace fathom::autograd
