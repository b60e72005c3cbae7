#pragma once
// Collective communication between the ranks of a job.
//
//   auto& world = runtime.world();
//   world.all_reduce(grads, ReduceOp::Avg);               // blocking
//   auto handle = world.all_reduce_async(bucket);         // returns at once ...
//   compute();                                            // ... and progresses meanwhile
//   handle->wait();                                       // rethrows the collective's error
//
// Backends: MPI carries host tensors (and is the control plane); NCCL carries device tensors.
// Every collective of a communicator runs in issue order on one progress thread (MPI) or one
// CUDA stream (NCCL), so the async forms overlap with the caller's computation; a blocking
// form runs on the calling thread when nothing else of the communicator is in flight. All ranks of a communicator must issue the same
// collectives in the same order, as in MPI; FATHOM_COMM_DEBUG=1 checks that before each one
// and reports a mismatch instead of hanging, and FATHOM_COMM_TIMEOUT (seconds, default 1800)
// aborts the job when a collective does not complete in time.
//
// Tensors must be contiguous and on the backend's device. Reductions of f16/bf16 accumulate in
// f32 on both backends and round once at the end: the result is the f32 reduction rounded to
// 16 bits (within one 16-bit ulp of it). Avg is the sum divided by size(), floating types only.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fathom::parallel {

enum class ReduceOp : uint8_t { Sum, Avg, Max, Min };
const char* reduce_op_name(ReduceOp op);

// A collective in flight.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective has completed; rethrows its error.
  virtual void wait() = 0;
  // True once it has completed (successfully or not); never blocks.
  virtual bool test() = 0;
};
using WorkHandle = std::shared_ptr<Work>;

// What a collective is, for error reports, the debug cross-check and the timeout report.
enum class CollectiveKind : uint8_t {
  AllReduce, ReduceScatter, ReduceScatterV, AllGather, AllGatherV, Broadcast, AllToAll, Send, Recv, Barrier
};
const char* collective_name(CollectiveKind kind);

struct Collective {
  CollectiveKind kind = CollectiveKind::Barrier;
  ReduceOp op = ReduceOp::Sum;
  Tensor input;                 // what this rank contributes (undefined for recv/barrier)
  Tensor output;                // where the result goes (== input for in-place collectives)
  std::vector<int64_t> counts;  // v-variants: elements of every rank's shard
  int root = 0;                 // broadcast
  int peer = -1, tag = 0;       // send/recv
  int64_t sequence = 0;         // this communicator's collective number, from 1
  // "all_reduce #17 (avg, f32, 4096 elements, 16.0 KiB)"
  std::string describe() const;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The name errors use: "world", "data", "tensor", "pipe", ...
  const std::string& name() const { return name_; }
  virtual const char* backend() const = 0;  // "mpi" or "nccl"
  // Where this backend's tensors live: the host for MPI, the rank's GPU for NCCL.
  virtual Device device() const = 0;
  // Whether tensors on `device` may be passed (the MPI backend also takes device tensors,
  // staged through host memory; NCCL only its own GPU's).
  virtual bool accepts(Device device) const { return device == this->device(); }

  // In place: every rank ends with op over all ranks' `tensor`.
  WorkHandle all_reduce_async(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  // input holds size() equal shards; rank r receives op over all ranks' shard r.
  WorkHandle reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::Sum);
  // output = the ranks' inputs concatenated in rank order (all inputs the same size).
  WorkHandle all_gather_async(const Tensor& input, const Tensor& output);
  // Uneven shards: counts[r] elements for rank r.
  WorkHandle all_gather_v_async(const Tensor& input, const Tensor& output, std::vector<int64_t> counts);
  WorkHandle reduce_scatter_v_async(const Tensor& input, const Tensor& output, std::vector<int64_t> counts,
                                    ReduceOp op = ReduceOp::Sum);
  // In place: every rank ends with root's tensor.
  WorkHandle broadcast_async(const Tensor& tensor, int root);
  // input and output hold size() equal chunks: chunk r of the input goes to rank r, chunk r of
  // the output comes from rank r (MPI_Alltoall).
  WorkHandle all_to_all_async(const Tensor& input, const Tensor& output);
  WorkHandle send_async(const Tensor& tensor, int peer, int tag = 0);
  WorkHandle recv_async(const Tensor& tensor, int peer, int tag = 0);

  // The blocking forms: complete on return. A backend may run them on the calling thread when
  // nothing else of the communicator is in flight (no hand-off to its progress thread).
  void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::Sum);
  void all_gather(const Tensor& input, const Tensor& output);
  void all_gather_v(const Tensor& input, const Tensor& output, std::vector<int64_t> counts);
  void reduce_scatter_v(const Tensor& input, const Tensor& output, std::vector<int64_t> counts,
                        ReduceOp op = ReduceOp::Sum);
  void broadcast(const Tensor& tensor, int root);
  void all_to_all(const Tensor& input, const Tensor& output);
  void send(const Tensor& tensor, int peer, int tag = 0);
  void recv(const Tensor& tensor, int peer, int tag = 0);
  void barrier();

  // Host scalars, for losses and counters: the reduction of one value over all ranks.
  double all_reduce_scalar(double value, ReduceOp op = ReduceOp::Sum);

  // A communicator over the ranks that pass the same `color`, ordered by `key` (MPI_Comm_split).
  // Collective over this communicator.
  virtual std::shared_ptr<Communicator> split(int color, int key, const std::string& name) = 0;

  // Collectives issued so far (the sequence number of the last one).
  int64_t collectives_issued() const { return sequence_; }
  // Whether a CollectiveGroup over this communicator is open.
  bool in_group() const { return open_groups_ > 0; }

 protected:
  Communicator(int rank, int size, std::string name) : rank_(rank), size_(size), name_(std::move(name)) {}
  // Runs `collective` (already validated and numbered) in issue order; returns its handle.
  // `blocking`: the caller waits on the handle at once.
  virtual WorkHandle start(Collective collective, bool blocking) = 0;
  // The outermost CollectiveGroup opens / closes (see there). Backends without group launches
  // keep the defaults: every collective starts when issued.
  virtual void begin_group() {}
  virtual void end_group() {}

 private:
  friend class CollectiveGroup;
  WorkHandle issue(Collective collective, bool blocking);
  void check_tensor(const Collective& collective, const Tensor& tensor, const char* role) const;
  void check_shard_counts(const Collective& collective, int64_t input_numel, int64_t output_numel) const;

  int rank_, size_;
  std::string name_;
  int64_t sequence_ = 0;
  int open_groups_ = 0;
};

// Collectives issued while a group is open are launched together when it closes: on NCCL one
// ncclGroupStart/ncclGroupEnd (a single launch for all of them, which NCCL may fuse), which is
// what bucketed gradient reductions issue when several buckets are ready at once. On MPI a
// group changes nothing. Inside a group only the async forms may be issued, and their handles
// waited on only once it has closed (the collectives do not start before). Groups nest; the
// outermost one launches.
//
//   {
//     CollectiveGroup group(comm);
//     for (auto& bucket : buckets) bucket.work = comm.all_reduce_async(bucket.flat);
//   }  // launched here
//   for (auto& bucket : buckets) bucket.work->wait();
class CollectiveGroup {
 public:
  explicit CollectiveGroup(Communicator& communicator);
  // Closes the group if close() was not called; a failure to launch then ends the job
  // (abort_job), since the ranks would otherwise wait for collectives that never start.
  ~CollectiveGroup();
  CollectiveGroup(const CollectiveGroup&) = delete;
  CollectiveGroup& operator=(const CollectiveGroup&) = delete;
  // Launches what the group holds; throws the backend's error.
  void close();

 private:
  Communicator* communicator_;
};

}  // namespace fathom::parallel
