#include "parallel/nccl_communicator.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_runtime.h"
#include "core/memory_stats.h"
#include "parallel/collective_observer.h"
#include "parallel/collective_signature.h"
#include "parallel/comm_worker.h"
#include "parallel/job_abort.h"
#include "parallel/nccl_convert.h"
#include "parallel/nccl_library.h"

namespace fathom::parallel {

bool nccl_available() { return nccl_library().loaded(); }
std::string nccl_unavailable_reason() { return nccl_library().error; }

namespace {
ncclDataType_t nccl_datatype(DType dtype) {
  switch (dtype) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::Bool: break;
  }
  FATHOM_FAIL("NCCL: no datatype for ", dtype_name(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

bool reduces_in_f32(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16; }

// When enqueued collectives are done: an event on the communicator's stream, and the tensors
// the GPU uses until then. A collective issued inside a CollectiveGroup shares its group's
// completion, whose event exists only once the group has closed (and launched).
struct NcclCompletion {
  cudaEvent_t event = nullptr;
  std::vector<Tensor> keep_alive;
  ~NcclCompletion() {
    if (event == nullptr) return;
    cudaEventSynchronize(event);  // buffers stay alive until the GPU is done with them
    cudaEventDestroy(event);
  }
};

// Completion polled so that wait() can report asynchronous NCCL errors and honour
// FATHOM_COMM_TIMEOUT.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclCompletion> completion, ncclComm_t comm, std::string description,
           CompletionReport report)
      : completion_(std::move(completion)), comm_(comm), description_(std::move(description)),
        report_(std::move(report)) {}
  bool test() override {
    FATHOM_CHECK(completion_->event != nullptr, description_,
                 " was waited on inside the CollectiveGroup that issued it; close the group first");
    const cudaError_t state = cudaEventQuery(completion_->event);
    if (state == cudaErrorNotReady) return false;
    FATHOM_CUDA_CHECK(state);
    report_.completed();
    return true;
  }
  void wait() override {
    const auto timeout = collective_timeout();
    const auto start = std::chrono::steady_clock::now();
    while (!test()) {
      ncclResult_t async = ncclSuccess;
      FATHOM_NCCL_CHECK(nccl_library().comm_get_async_error(comm_, &async));
      FATHOM_NCCL_CHECK(async);
      if (std::chrono::steady_clock::now() - start > timeout) {
        // Abort the communicator first: its kernels would otherwise spin on the GPU forever,
        // and a process cannot exit cleanly while they do.
        nccl_library().comm_abort(comm_);
        abort_job(detail::concat(description_, " (nccl) did not complete within ", timeout.count(),
                                 " s (FATHOM_COMM_TIMEOUT); the NCCL communicator was aborted"));
      }
      std::this_thread::yield();
    }
  }

 private:
  std::shared_ptr<NcclCompletion> completion_;
  ncclComm_t comm_;
  std::string description_;
  CompletionReport report_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device, std::shared_ptr<Communicator> control,
                   std::string name)
      : Communicator(rank, size, std::move(name)), comm_(comm), device_(device), control_(std::move(control)) {
    FATHOM_CUDA_CHECK(cudaSetDevice(device_));
    FATHOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclCommunicator() override {
    cudaStreamSynchronize(stream_);
    nccl_library().comm_destroy(comm_);
    cudaStreamDestroy(stream_);
  }
  const char* backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }

  std::shared_ptr<Communicator> split(int color, int key, const std::string& name) override {
    // The MPI twin splits alike, so the debug cross-check has a control communicator too.
    std::shared_ptr<Communicator> control = control_->split(color, key, name);
    ncclComm_t child = nullptr;
    FATHOM_NCCL_CHECK(nccl_library().comm_split(comm_, color, key, &child, nullptr));
    return std::make_shared<NcclCommunicator>(child, control->rank(), control->size(), device_, control, name);
  }

 protected:

  void begin_group() override {
    FATHOM_NCCL_CHECK(nccl_library().group_start());
    group_ = std::make_shared<NcclCompletion>();
  }

  void end_group() override {
    const std::shared_ptr<NcclCompletion> group = std::exchange(group_, nullptr);
    const std::vector<std::function<void()>> after = std::exchange(after_group_, {});
    FATHOM_NCCL_CHECK(nccl_library().group_end());  // the group's collectives are enqueued here
    for (const auto& finish : after) finish();      // then what consumes their results
    group->event = record_done();
  }

  WorkHandle start(Collective c, bool /*blocking: enqueueing on the stream is already cheap*/) override {
    if (comm_debug_enabled() && c.kind != CollectiveKind::Send && c.kind != CollectiveKind::Recv) cross_check(c);
    const NcclLibrary& nccl = nccl_library();
    FATHOM_CUDA_CHECK(cudaSetDevice(device_));
    // Inputs were produced on the compute stream: the communication stream waits for them.
    cudaEvent_t ready = nullptr;
    FATHOM_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    void* const compute = cuda::current_stream();
    FATHOM_CUDA_CHECK(cudaEventRecord(ready, compute ? static_cast<cudaStream_t>(compute) : cudaStreamLegacy));
    FATHOM_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
    cudaEventDestroy(ready);

    // Work enqueued on stream_ after the collective (narrowing an f32-staged result): in a group
    // the collective itself is enqueued only when the group closes, so this waits for that.
    std::vector<std::function<void()>> after;
    std::vector<Tensor> keep_alive{c.input, c.output};
    const bool staged = c.input.defined() && reduces_in_f32(c.input.dtype()) &&
                        (c.kind == CollectiveKind::AllReduce || c.kind == CollectiveKind::ReduceScatter);
    const bool staged_v = c.kind == CollectiveKind::ReduceScatterV && reduces_in_f32(c.input.dtype());
    switch (c.kind) {
      case CollectiveKind::AllReduce:
      case CollectiveKind::ReduceScatter: {
        Tensor in = c.input, out = c.output;
        if (staged) {
          in = widened(c.input);
          out = c.kind == CollectiveKind::AllReduce ? in : device_buffer(c.output.numel());
          keep_alive.insert(keep_alive.end(), {in, out});
        }
        if (c.kind == CollectiveKind::AllReduce)
          FATHOM_NCCL_CHECK(nccl.all_reduce(in.raw_data(), out.raw_data(), in.numel(), nccl_datatype(in.dtype()),
                                            nccl_op(c.op), comm_, stream_));
        else
          FATHOM_NCCL_CHECK(nccl.reduce_scatter(in.raw_data(), out.raw_data(), out.numel(),
                                                nccl_datatype(in.dtype()), nccl_op(c.op), comm_, stream_));
        if (staged) after.push_back(narrowing(out, c.output));
        break;
      }
      case CollectiveKind::AllGather:
        FATHOM_NCCL_CHECK(nccl.all_gather(c.input.raw_data(), c.output.raw_data(), c.input.numel(),
                                          nccl_datatype(c.input.dtype()), comm_, stream_));
        break;
      case CollectiveKind::AllToAll: {
        // One send and one receive per peer in one NCCL group (NCCL has no all-to-all call).
        const int64_t chunk = c.input.numel() / size();
        const size_t bytes = static_cast<size_t>(chunk) * element_size(c.input.dtype());
        FATHOM_NCCL_CHECK(nccl.group_start());
        for (int r = 0; r < size(); ++r) {
          const char* from = static_cast<const char*>(c.input.raw_data()) + r * bytes;
          char* to = static_cast<char*>(c.output.raw_data()) + r * bytes;
          FATHOM_NCCL_CHECK(nccl.send(from, chunk, nccl_datatype(c.input.dtype()), r, comm_, stream_));
          FATHOM_NCCL_CHECK(nccl.recv(to, chunk, nccl_datatype(c.input.dtype()), r, comm_, stream_));
        }
        FATHOM_NCCL_CHECK(nccl.group_end());
        break;
      }
      case CollectiveKind::Broadcast:
        FATHOM_NCCL_CHECK(nccl.broadcast(c.output.raw_data(), c.output.raw_data(), c.output.numel(),
                                         nccl_datatype(c.output.dtype()), c.root, comm_, stream_));
        break;
      case CollectiveKind::Send:
        FATHOM_NCCL_CHECK(nccl.send(c.input.raw_data(), c.input.numel(), nccl_datatype(c.input.dtype()), c.peer,
                                    comm_, stream_));
        break;
      case CollectiveKind::Recv:
        FATHOM_NCCL_CHECK(nccl.recv(c.output.raw_data(), c.output.numel(), nccl_datatype(c.output.dtype()), c.peer,
                                    comm_, stream_));
        break;
      case CollectiveKind::Barrier: {
        // NCCL has no barrier: an all-reduce of one value serves.
        Tensor token = Tensor::zeros({1}, DType::F32, device());
        keep_alive.push_back(token);
        FATHOM_NCCL_CHECK(nccl.all_reduce(token.raw_data(), token.raw_data(), 1, ncclFloat32, ncclSum, comm_, stream_));
        break;
      }
      case CollectiveKind::ReduceScatterV: {
        // Rank r's slice of the input is reduced onto rank r; 16-bit inputs widen to f32 first.
        Tensor in = staged_v ? widened(c.input) : c.input;
        Tensor out = staged_v ? device_buffer(c.output.numel()) : c.output;
        if (staged_v) keep_alive.insert(keep_alive.end(), {in, out});
        const size_t element = element_size(in.dtype());
        FATHOM_NCCL_CHECK(nccl.group_start());
        int64_t offset = 0;
        for (int r = 0; r < size(); ++r) {
          void* destination = r == rank() ? out.raw_data() : nullptr;
          FATHOM_NCCL_CHECK(nccl.reduce(static_cast<const char*>(in.raw_data()) + offset * element, destination,
                                        c.counts[r], nccl_datatype(in.dtype()), nccl_op(c.op), r, comm_, stream_));
          offset += c.counts[r];
        }
        FATHOM_NCCL_CHECK(nccl.group_end());
        if (staged_v) after.push_back(narrowing(out, c.output));
        break;
      }
      case CollectiveKind::AllGatherV: {
        // Every rank broadcasts its shard into its place in everyone's output.
        const size_t element = element_size(c.output.dtype());
        FATHOM_NCCL_CHECK(nccl.group_start());
        int64_t offset = 0;
        for (int r = 0; r < size(); ++r) {
          char* destination = static_cast<char*>(c.output.raw_data()) + offset * element;
          const void* source = r == rank() ? c.input.raw_data() : destination;
          FATHOM_NCCL_CHECK(nccl.broadcast(source, destination, c.counts[r], nccl_datatype(c.output.dtype()), r, comm_,
                                           stream_));
          offset += c.counts[r];
        }
        FATHOM_NCCL_CHECK(nccl.group_end());
        break;
      }
    }
    if (group_) {
      group_->keep_alive.insert(group_->keep_alive.end(), keep_alive.begin(), keep_alive.end());
      after_group_.insert(after_group_.end(), after.begin(), after.end());
      return std::make_shared<NcclWork>(group_, comm_, c.describe(), CompletionReport(c, *this));
    }
    for (const auto& finish : after) finish();
    auto completion = std::make_shared<NcclCompletion>();
    completion->keep_alive = std::move(keep_alive);
    completion->event = record_done();
    auto work = std::make_shared<NcclWork>(std::move(completion), comm_, c.describe(), CompletionReport(c, *this));
    if (c.kind == CollectiveKind::Barrier) work->wait();
    return work;
  }

 private:
  cudaEvent_t record_done() {
    cudaEvent_t done = nullptr;
    FATHOM_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    FATHOM_CUDA_CHECK(cudaEventRecord(done, stream_));
    return done;
  }
  // Rounds the f32 result of a staged 16-bit reduction into the caller's output.
  std::function<void()> narrowing(const Tensor& f32, const Tensor& output) {
    return [this, f32, output] {
      nccl_convert::narrow_from_f32(f32.data<float>(), output.raw_data(), output.numel(),
                                    output.dtype() == DType::BF16, stream_);
    };
  }
  Tensor widened(const Tensor& half) {
    Tensor f32 = device_buffer(half.numel());
    nccl_convert::widen_to_f32(half.raw_data(), f32.data<float>(), half.numel(), half.dtype() == DType::BF16,
                               stream_);
    return f32;
  }
  Tensor device_buffer(int64_t elements) {
    MemoryTagScope tag(MemoryTag::Communication);
    return Tensor::empty({elements}, DType::F32, device());
  }
  void cross_check(const Collective& c) {
    const CollectiveSignature mine = signature_of(c);
    constexpr int64_t kWords = sizeof(CollectiveSignature) / sizeof(int64_t);
    static_assert(sizeof(CollectiveSignature) % sizeof(int64_t) == 0);
    Tensor local = Tensor::empty({kWords}, DType::I64);
    std::memcpy(local.raw_data(), &mine, sizeof mine);
    Tensor all = Tensor::empty({kWords * size()}, DType::I64);
    control_->all_gather(local, all);
    std::vector<CollectiveSignature> by_rank(size());
    std::memcpy(by_rank.data(), all.raw_data(), sizeof(CollectiveSignature) * size());
    const std::string mismatch = find_mismatch(by_rank, "\"" + name() + "\" (nccl)");
    FATHOM_CHECK(mismatch.empty(), mismatch);
  }

  ncclComm_t comm_;
  int device_;
  std::shared_ptr<Communicator> control_;  // MPI communicator over the same ranks
  cudaStream_t stream_ = nullptr;
  // While a CollectiveGroup is open: its shared completion and the work to enqueue after it.
  std::shared_ptr<NcclCompletion> group_;
  std::vector<std::function<void()>> after_group_;
};
}  // namespace

std::string nccl_loaded_version() {
  const NcclLibrary& nccl = nccl_library();
  int code = 0;
  if (!nccl.loaded() || nccl.get_version(&code) != ncclSuccess) return "";
  return detail::concat(code / 10000, ".", code / 100 % 100, ".", code % 100);
}

std::string nccl_self_test(int device) {
  const NcclLibrary& nccl = nccl_library();
  if (!nccl.loaded()) return nccl.error;
  try {
    FATHOM_CUDA_CHECK(cudaSetDevice(device));
    ncclUniqueId id{};
    FATHOM_NCCL_CHECK(nccl.get_unique_id(&id));
    ncclComm_t comm = nullptr;
    FATHOM_NCCL_CHECK(nccl.comm_init_rank(&comm, 1, id, 0));
    NcclCommunicator communicator(comm, 0, 1, device, nullptr, "self-test");
    Tensor values = Tensor::full({1024}, 3.0, DType::F32).to(Device::cuda(device));
    communicator.all_reduce(values, ReduceOp::Sum);
    const Tensor back = values.to(kCPU);
    for (int64_t i = 0; i < back.numel(); ++i)
      if (back.data<float>()[i] != 3.0f) return detail::concat("all_reduce returned ", back.data<float>()[i], ", not 3");
    return "";
  } catch (const std::exception& error) {
    return error.what();
  }
}

std::shared_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device, const std::string& name) {
  const NcclLibrary& nccl = nccl_library();
  FATHOM_CHECK(nccl.loaded(), "NCCL backend: ", nccl.error);
  FATHOM_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id{};
  static_assert(sizeof id % sizeof(int64_t) == 0);
  Tensor id_words = Tensor::zeros({static_cast<int64_t>(sizeof id / sizeof(int64_t))}, DType::I64);
  if (bootstrap.rank() == 0) {
    FATHOM_NCCL_CHECK(nccl.get_unique_id(&id));
    std::memcpy(id_words.raw_data(), &id, sizeof id);
  }
  bootstrap.broadcast(id_words, 0);
  std::memcpy(&id, id_words.raw_data(), sizeof id);
  ncclComm_t comm = nullptr;
  FATHOM_NCCL_CHECK(nccl.comm_init_rank(&comm, bootstrap.size(), id, bootstrap.rank()));
  // A private MPI twin over the same ranks carries the debug cross-check.
  std::shared_ptr<Communicator> control = bootstrap.split(0, bootstrap.rank(), name + " (control)");
  return std::make_shared<NcclCommunicator>(comm, bootstrap.rank(), bootstrap.size(), device, control, name);
}

}  // namespace fathom::parallel
