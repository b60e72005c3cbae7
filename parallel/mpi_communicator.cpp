#include "parallel/mpi_communicator.h"

#include <climits>
#include <thread>

#include "core/memory_stats.h"
#include "parallel/collective_observer.h"
#include "kernels/elementwise.h"
#include "parallel/collective_signature.h"
#include "parallel/comm_worker.h"
#include "parallel/job_abort.h"
#include "parallel/mpi_check.h"
#include "parallel/mpi_native.h"

namespace fathom::parallel {

namespace mpi_detail {
MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::F32: return MPI_FLOAT;
    case DType::F64: return MPI_DOUBLE;
    case DType::F16:
    case DType::BF16: return MPI_UINT16_T;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::Bool: break;
  }
  FATHOM_FAIL("MPI: no datatype for ", dtype_name(dtype));
}

MPI_Op mpi_op(int reduce_op) {
  switch (static_cast<ReduceOp>(reduce_op)) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;  // Avg divides afterwards
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  FATHOM_FAIL("MPI: unknown reduction ", reduce_op);
}
}  // namespace mpi_detail

namespace {
using mpi_detail::mpi_datatype;
using mpi_detail::mpi_op;

int int_count(int64_t count, const Collective& c) {
  FATHOM_CHECK(count <= INT_MAX, c.describe(), ": MPI counts are 32-bit; split tensors above ", INT_MAX,
               " elements into several collectives");
  return static_cast<int>(count);
}

std::vector<int> int_counts(const Collective& c) {
  std::vector<int> out;
  for (int64_t count : c.counts) out.push_back(int_count(count, c));
  return out;
}

// MPI has no 16-bit floats: their reductions run on an f32 copy and round once at the end.
bool reduces_in_f32(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16; }

Tensor f32_staging(const Tensor& tensor) {
  MemoryTagScope tag(MemoryTag::Communication);
  return tensor.to(DType::F32);
}

Tensor f32_buffer(int64_t elements) {
  MemoryTagScope tag(MemoryTag::Communication);
  return Tensor::empty({elements}, DType::F32);
}

int query(MPI_Comm comm, int (*what)(MPI_Comm, int*)) {
  int value = 0;
  FATHOM_MPI_CHECK(what(comm, &value));
  return value;
}

// A posted MPI_Isend / MPI_Irecv. wait() polls so that it can honour FATHOM_COMM_TIMEOUT.
class RequestWork final : public Work {
 public:
  RequestWork(MPI_Request request, Tensor buffer, std::string description, std::string communicator,
              CompletionReport report)
      : request_(request), buffer_(std::move(buffer)), description_(std::move(description)),
        communicator_(std::move(communicator)), report_(std::move(report)) {}
  ~RequestWork() override {
    if (!done_) wait();  // MPI must not write into a freed buffer
  }
  bool test() override {
    std::lock_guard lock(mutex_);
    if (!done_) {
      int flag = 0;
      FATHOM_MPI_CHECK(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE));
      done_ = flag != 0;
      if (done_) report_.completed();
    }
    return done_;
  }
  void wait() override {
    const auto timeout = collective_timeout();
    const auto start = std::chrono::steady_clock::now();
    while (!test()) {
      if (std::chrono::steady_clock::now() - start > timeout)
        abort_job(detail::concat(description_, " on communicator \"", communicator_, "\" did not complete within ",
                                 timeout.count(), " s (FATHOM_COMM_TIMEOUT); is the peer posting the matching ",
                                 "send/recv with the same tag?"));
      std::this_thread::yield();
    }
  }

 private:
  std::mutex mutex_;
  MPI_Request request_;
  Tensor buffer_;  // kept alive while MPI reads or writes it
  std::string description_, communicator_;
  CompletionReport report_;
  bool done_ = false;
};
}  // namespace

MPI_Comm native_mpi_comm(const Communicator& communicator) {
  const auto* mpi = dynamic_cast<const MpiCommunicator*>(&communicator);
  FATHOM_CHECK(mpi != nullptr, "communicator \"", communicator.name(), "\" is not an MPI communicator (backend ",
               communicator.backend(), ")");
  return mpi->native().comm;
}

MpiCommunicator::MpiCommunicator(std::unique_ptr<Native> native, std::string name)
    : Communicator(query(native->comm, MPI_Comm_rank), query(native->comm, MPI_Comm_size), name),
      native_(std::move(native)),
      worker_(std::make_unique<CommWorker>("\"" + name + "\" (mpi)")) {}

MpiCommunicator::~MpiCommunicator() {
  worker_.reset();  // completes what was issued
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (native_->owned && !finalized) MPI_Comm_free(&native_->comm);
}

std::shared_ptr<Communicator> MpiCommunicator::split(int color, int key, const std::string& name) {
  auto native = std::make_unique<Native>();
  native->owned = true;
  worker_->run([] { return std::string("split"); }, [&] { FATHOM_MPI_CHECK(MPI_Comm_split(native_->comm, color, key, &native->comm)); });
  return std::make_shared<MpiCommunicator>(std::move(native), name);
}

WorkHandle MpiCommunicator::start(Collective collective, bool blocking) {
  if (collective.kind == CollectiveKind::Send || collective.kind == CollectiveKind::Recv)
    return start_point_to_point(collective);
  auto c = std::make_shared<Collective>(std::move(collective));
  auto describe = [c] { return c->describe(); };
  auto task = [this, c] {
    if (!collectives_observed()) return run_collective(*c);
    const auto begin = std::chrono::steady_clock::now();
    run_collective(*c);
    report_collective(*c, name(), size(), begin, std::chrono::steady_clock::now());
  };
  return blocking ? worker_->run_or_submit(std::move(describe), std::move(task))
                  : worker_->submit(std::move(describe), std::move(task));
}

WorkHandle MpiCommunicator::start_point_to_point(const Collective& c) {
  const Tensor& buffer = c.kind == CollectiveKind::Send ? c.input : c.output;
  FATHOM_CHECK(buffer.device().is_cpu(), c.describe(), " on \"", name(), "\": the MPI backend sends host tensors only, got ",
               buffer.device().str(), "; use the NCCL communicator (Runtime::nccl_world) for device tensors");
  MPI_Request request = MPI_REQUEST_NULL;
  if (c.kind == CollectiveKind::Send) {
    FATHOM_MPI_CHECK(MPI_Isend(c.input.raw_data(), int_count(c.input.numel(), c), mpi_datatype(c.input.dtype()),
                               c.peer, c.tag, native_->comm, &request));
    return std::make_shared<RequestWork>(request, c.input, c.describe(), name(), CompletionReport(c, *this));
  }
  FATHOM_MPI_CHECK(MPI_Irecv(c.output.raw_data(), int_count(c.output.numel(), c), mpi_datatype(c.output.dtype()),
                             c.peer, c.tag, native_->comm, &request));
  return std::make_shared<RequestWork>(request, c.output, c.describe(), name(), CompletionReport(c, *this));
}

void MpiCommunicator::run_host_staged(Collective& c) {
  const bool in_place = c.input.defined() && c.output.defined() && c.input.shares_storage(c.output) &&
                        c.input.raw_data() == c.output.raw_data() && c.input.sizes() == c.output.sizes();
  MemoryTagScope tag(MemoryTag::Communication);
  Collective host = c;
  if (c.output.defined()) host.output = c.output.to(kCPU);
  if (c.input.defined()) host.input = in_place ? host.output : c.input.to(kCPU);
  run_collective(host);
  if (c.output.defined() && c.kind != CollectiveKind::Barrier) c.output.copy_(host.output);
}

void MpiCommunicator::run_collective(Collective& c) {
  const bool on_device = (c.input.defined() && !c.input.device().is_cpu()) ||
                         (c.output.defined() && !c.output.device().is_cpu());
  if (on_device) return run_host_staged(c);
  MPI_Comm comm = native_->comm;
  if (comm_debug_enabled()) {
    const CollectiveSignature mine = signature_of(c);
    std::vector<CollectiveSignature> all(size());
    FATHOM_MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm));
    const std::string mismatch = find_mismatch(all, "\"" + name() + "\"");
    FATHOM_CHECK(mismatch.empty(), mismatch);
  }
  const bool staged = c.input.defined() && reduces_in_f32(c.input.dtype());
  const auto finish_reduction = [&](Tensor& result, const Tensor& destination) {
    if (c.op == ReduceOp::Avg) mul_(result, 1.0 / size());
    if (!result.shares_storage(destination)) destination.copy_(result);
  };
  switch (c.kind) {
    case CollectiveKind::AllReduce: {
      Tensor buffer = staged ? f32_staging(c.output) : c.output;
      FATHOM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer.raw_data(), int_count(buffer.numel(), c),
                                     mpi_datatype(buffer.dtype()), mpi_op(int(c.op)), comm));
      finish_reduction(buffer, c.output);
      break;
    }
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::ReduceScatterV: {
      const Tensor input = staged ? f32_staging(c.input) : c.input;
      Tensor output = staged ? f32_buffer(c.output.numel()) : c.output;
      if (c.kind == CollectiveKind::ReduceScatter) {
        FATHOM_MPI_CHECK(MPI_Reduce_scatter_block(input.raw_data(), output.raw_data(), int_count(output.numel(), c),
                                                  mpi_datatype(input.dtype()), mpi_op(int(c.op)), comm));
      } else {
        const std::vector<int> counts = int_counts(c);
        FATHOM_MPI_CHECK(MPI_Reduce_scatter(input.raw_data(), output.raw_data(), counts.data(),
                                            mpi_datatype(input.dtype()), mpi_op(int(c.op)), comm));
      }
      finish_reduction(output, c.output);
      break;
    }
    case CollectiveKind::AllGather: {
      const int count = int_count(c.input.numel(), c);
      const MPI_Datatype type = mpi_datatype(c.input.dtype());
      FATHOM_MPI_CHECK(MPI_Allgather(c.input.raw_data(), count, type, c.output.raw_data(), count, type, comm));
      break;
    }
    case CollectiveKind::AllGatherV: {
      const std::vector<int> counts = int_counts(c);
      std::vector<int> displacements(counts.size(), 0);
      int64_t offset = 0;
      for (size_t r = 0; r < counts.size(); ++r) displacements[r] = int_count(offset, c), offset += counts[r];
      const MPI_Datatype type = mpi_datatype(c.input.dtype());
      FATHOM_MPI_CHECK(MPI_Allgatherv(c.input.raw_data(), counts[rank()], type, c.output.raw_data(), counts.data(),
                                      displacements.data(), type, comm));
      break;
    }
    case CollectiveKind::AllToAll: {
      const int count = int_count(c.input.numel() / size(), c);
      const MPI_Datatype type = mpi_datatype(c.input.dtype());
      FATHOM_MPI_CHECK(MPI_Alltoall(c.input.raw_data(), count, type, c.output.raw_data(), count, type, comm));
      break;
    }
    case CollectiveKind::Broadcast:
      FATHOM_MPI_CHECK(MPI_Bcast(c.output.raw_data(), int_count(c.output.numel(), c), mpi_datatype(c.output.dtype()),
                                 c.root, comm));
      break;
    case CollectiveKind::Barrier:
      FATHOM_MPI_CHECK(MPI_Barrier(comm));
      break;
    case CollectiveKind::Send:
    case CollectiveKind::Recv: FATHOM_FAIL("point-to-point transfers do not run on the collective queue");
  }
}

namespace {
// A private duplicate, so that Fathom's collectives never interleave with the program's own
// MPI calls on the same communicator.
std::shared_ptr<Communicator> duplicate(MPI_Comm comm, const char* name) {
  auto native = std::make_unique<MpiCommunicator::Native>();
  FATHOM_MPI_CHECK(MPI_Comm_dup(comm, &native->comm));
  native->owned = true;
  return std::make_shared<MpiCommunicator>(std::move(native), name);
}
}  // namespace

std::shared_ptr<Communicator> mpi_world_communicator() { return duplicate(MPI_COMM_WORLD, "world"); }
std::shared_ptr<Communicator> mpi_self_communicator() { return duplicate(MPI_COMM_SELF, "self"); }

}  // namespace fathom::parallel
