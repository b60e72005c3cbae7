#pragma once
// Where an emulated kernel launch goes once its configuration has been checked. A link-time
// choice, one definition per build:
//   immediate_submit.cpp  runs it at once (the emulator's own tests, which have no CUDA runtime);
//   streams.cpp           queues it on its CUDA stream, run deferred by the emulated runtime
//                         (the CUDA emulation build, docs/gpu.md "CUDA emulation").

#include <functional>

namespace fathom::simt {

// `stream` is a cudaStream_t (nullptr: the legacy default stream).
void submit(void* stream, std::function<void()> work);

// Whether a kernel may be handed `pointer` (a pointer-typed argument): nullptr, or an address in
// (or one past the end of) device memory. A host pointer would fault on a GPU, so the emulated
// runtime refuses it at the launch; the immediate build accepts everything.
bool is_device_address(const void* pointer);

}  // namespace fathom::simt
