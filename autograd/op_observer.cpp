#include "autograd/op_observer.h"

namespace fathom::autograd {
namespace {
thread_local OpObserver* t_observer = nullptr;
}

OpObserverScope::OpObserverScope(OpObserver* observer) : previous_(t_observer) { t_observer = observer; }
OpObserverScope::~OpObserverScope() { t_observer = previous_; }
OpObserver* current_op_observer() { return t_observer; }

}  // namespace fathom::autograd
