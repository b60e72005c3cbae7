#include "core/simt/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define FATHOM_SIMT_ASAN 1
#endif

#if !defined(__x86_64__)
#error "the SIMT emulator's fibers switch with x86-64 code; port fathom_simt_switch to this architecture"
#endif

// fathom_simt_switch(&save, next): pushes the callee-saved registers and the FP control words,
// stores the stack pointer in *save, loads `next` and pops the same from there.
extern "C" void fathom_simt_switch(void** save, void* next);
asm(R"(
.text
.globl fathom_simt_switch
.type fathom_simt_switch,@function
fathom_simt_switch:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
.size fathom_simt_switch,.-fathom_simt_switch
)");

namespace fathom::simt {
namespace {
thread_local Fiber* running = nullptr;

#ifdef FATHOM_SIMT_ASAN
// The scheduler's stack, as ASan knows it, for the switches back.
thread_local const void* scheduler_bottom = nullptr;
thread_local size_t scheduler_size = 0;
#endif
}  // namespace

FiberStack::FiberStack(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  bytes_ = (bytes + page - 1) / page * page;
  mapped_ = bytes_ + page;
  mapping_ = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  FATHOM_CHECK(mapping_ != MAP_FAILED, "SIMT emulator: cannot map a fiber stack of ", mapped_, " bytes");
  FATHOM_CHECK(mprotect(mapping_, page, PROT_NONE) == 0, "SIMT emulator: cannot protect a fiber stack's guard page");
  base_ = static_cast<char*>(mapping_) + page;
}

FiberStack::~FiberStack() { munmap(mapping_, mapped_); }

Fiber* Fiber::current() { return running; }

void Fiber::start(FiberStack& stack, std::function<void()> body) {
  FATHOM_CHECK(done_, "SIMT emulator: a fiber was restarted while it ran");
  stack_ = &stack;
#ifdef FATHOM_SIMT_ASAN
  // The previous fiber on this stack left its frames' redzones poisoned: it never returned.
  __asan_unpoison_memory_region(stack.bottom(), stack.size());
#endif
  body_ = std::move(body);
  error_ = nullptr;
  done_ = false;
  // A frame for fathom_simt_switch to pop: the FP control words, six registers, then entry() as
  // the return address, above it a slot standing for entry()'s own return address so that entry
  // starts with the stack aligned as after a call.
  auto* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(stack.top()) & ~uintptr_t{15});
  uint64_t* sp = top - 1;
  *sp = 0;  // entry's return address: none (a backtrace stops here)
  *--sp = reinterpret_cast<uint64_t>(&Fiber::entry);
  for (int i = 0; i < 6; ++i) *--sp = 0;
  uint32_t mxcsr = 0;
  uint16_t fpu = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpu));
  *--sp = static_cast<uint64_t>(mxcsr) | (static_cast<uint64_t>(fpu) << 32);
  sp_ = sp;
}

void Fiber::resume() {
  FATHOM_CHECK(!done_ && running == nullptr, "SIMT emulator: resume of a finished fiber, or from inside a fiber");
  running = this;
#ifdef FATHOM_SIMT_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, stack_->bottom(), stack_->size());
  fathom_simt_switch(&scheduler_sp_, sp_);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  fathom_simt_switch(&scheduler_sp_, sp_);
#endif
  running = nullptr;
  if (done_ && error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void Fiber::yield() {
  Fiber* self = running;
  FATHOM_CHECK(self != nullptr, "SIMT emulator: yield outside a fiber");
#ifdef FATHOM_SIMT_ASAN
  __sanitizer_start_switch_fiber(&self->asan_fake_stack_, scheduler_bottom, scheduler_size);
  fathom_simt_switch(&self->sp_, self->scheduler_sp_);
  __sanitizer_finish_switch_fiber(self->asan_fake_stack_, &scheduler_bottom, &scheduler_size);
#else
  fathom_simt_switch(&self->sp_, self->scheduler_sp_);
#endif
}

void Fiber::entry() {
  Fiber* self = running;
#ifdef FATHOM_SIMT_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &scheduler_bottom, &scheduler_size);
#endif
  try {
    self->body_();
  } catch (...) {
    self->error_ = std::current_exception();
  }
  self->body_ = nullptr;
  self->done_ = true;
#ifdef FATHOM_SIMT_ASAN
  __sanitizer_start_switch_fiber(nullptr, scheduler_bottom, scheduler_size);  // this stack ends
#endif
  fathom_simt_switch(&self->sp_, self->scheduler_sp_);
  __builtin_unreachable();
}

}  // namespace fathom::simt
