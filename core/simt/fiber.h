#pragma once
// Fibers for the SIMT emulator (docs/gpu.md, "CUDA emulation"): each emulated CUDA thread runs on
// a stack of its own and yields to the block's scheduler at barriers and warp operations. A
// switch saves only what the x86-64 System V ABI makes the callee keep (rbx, rbp, r12-r15, the
// stack pointer, MXCSR and the x87 control word): a few nanoseconds, no system call — glibc's
// swapcontext would make one per switch, and a barrier of 1024 threads is 2048 switches.
// AddressSanitizer is told of every switch, so it follows the stacks.

#include <cstddef>
#include <exception>
#include <functional>

namespace fathom::simt {

// A stack with a guard page below it, reused from fiber to fiber.
class FiberStack {
 public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  void* top() const { return static_cast<char*>(base_) + bytes_; }
  void* bottom() const { return base_; }
  size_t size() const { return bytes_; }

 private:
  void* mapping_ = nullptr;
  size_t mapped_ = 0;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

// One fiber: started with a body, resumed by its scheduler until the body returns. The body
// runs with the scheduler suspended; it gives control back with yield(). An exception that
// leaves the body is kept and rethrown by the resume() that saw it end.
class Fiber {
 public:
  Fiber() = default;
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  void start(FiberStack& stack, std::function<void()> body);
  void resume();  // from the scheduler: runs the fiber until it yields or ends
  bool done() const { return done_; }
  // From inside a fiber: back to the scheduler that resumed it.
  static void yield();
  // The fiber running on this OS thread, or null in the scheduler.
  static Fiber* current();

 private:
  static void entry();
  void* sp_ = nullptr;            // the fiber's saved stack pointer while it is suspended
  void* scheduler_sp_ = nullptr;  // the scheduler's while the fiber runs
  FiberStack* stack_ = nullptr;
  std::function<void()> body_;
  std::exception_ptr error_;
  bool done_ = true;
  void* asan_fake_stack_ = nullptr;
};

}  // namespace fathom::simt
