#include "parallel/communicator.h"

#include <cstdio>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/memory_stats.h"
#include "parallel/job_abort.h"

namespace fathom::parallel {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

const char* collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::ReduceScatterV: return "reduce_scatter_v";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::AllGatherV: return "all_gather_v";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::AllToAll: return "all_to_all";
    case CollectiveKind::Send: return "send";
    case CollectiveKind::Recv: return "recv";
    case CollectiveKind::Barrier: return "barrier";
  }
  return "?";
}

namespace {
bool is_reduction(CollectiveKind kind) {
  return kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter ||
         kind == CollectiveKind::ReduceScatterV;
}

}  // namespace

std::string Collective::describe() const {
  std::string out = detail::concat(collective_name(kind), " #", sequence);
  if (kind == CollectiveKind::Barrier) return out;
  const Tensor& payload = input.defined() ? input : output;
  out += " (";
  if (is_reduction(kind)) out += detail::concat(reduce_op_name(op), ", ");
  out += detail::concat(dtype_name(payload.dtype()), ", ", payload.numel(), " elements, ",
                        format_bytes(static_cast<double>(payload.nbytes())));
  if (kind == CollectiveKind::Broadcast) out += detail::concat(", root ", root);
  if (kind == CollectiveKind::Send) out += detail::concat(", to rank ", peer, ", tag ", tag);
  if (kind == CollectiveKind::Recv) out += detail::concat(", from rank ", peer, ", tag ", tag);
  return out + ")";
}

void Communicator::check_tensor(const Collective& c, const Tensor& tensor, const char* role) const {
  const char* op = collective_name(c.kind);
  FATHOM_CHECK(tensor.defined(), op, " on communicator \"", name_, "\": the ", role, " tensor is undefined");
  FATHOM_CHECK(tensor.is_contiguous(), op, " on communicator \"", name_, "\": the ", role,
               " tensor must be contiguous; call .contiguous() first");
  FATHOM_CHECK(accepts(tensor.device()), op, " on communicator \"", name_, "\" (", backend(), "): the ", role,
               " tensor is on ", tensor.device().str(), ", but this communicator's tensors live on ",
               device().str(), "; move it with .to(", device().str(), ")");
  const DType dtype = tensor.dtype();
  FATHOM_CHECK(dtype != DType::Bool, op, ": bool tensors are not supported; convert to i32 first");
  if (is_reduction(c.kind) && c.op == ReduceOp::Avg)
    FATHOM_CHECK(is_floating_point(dtype), op, ": avg needs a floating-point tensor, got ", dtype_name(dtype),
                 "; reduce with sum and divide yourself");
}

void Communicator::check_shard_counts(const Collective& c, int64_t input_numel, int64_t output_numel) const {
  const char* op = collective_name(c.kind);
  FATHOM_CHECK(static_cast<int>(c.counts.size()) == size_, op, ": counts has ", c.counts.size(),
               " entries but the communicator has ", size_, " ranks; give one count per rank");
  for (int64_t count : c.counts) FATHOM_CHECK(count >= 0, op, ": counts must be >= 0, got ", count);
  const int64_t total = std::accumulate(c.counts.begin(), c.counts.end(), int64_t{0});
  const int64_t mine = c.counts[rank_];
  FATHOM_CHECK(input_numel == (c.kind == CollectiveKind::AllGatherV ? mine : total), op,
               ": the input has ", input_numel, " elements but counts say ",
               c.kind == CollectiveKind::AllGatherV ? mine : total);
  FATHOM_CHECK(output_numel == (c.kind == CollectiveKind::AllGatherV ? total : mine), op,
               ": the output has ", output_numel, " elements but counts say ",
               c.kind == CollectiveKind::AllGatherV ? total : mine);
}

WorkHandle Communicator::issue(Collective c, bool blocking) {
  const char* op = collective_name(c.kind);
  if (c.input.defined()) check_tensor(c, c.input, "input");
  if (c.output.defined() && !c.output.shares_storage(c.input)) check_tensor(c, c.output, "output");
  if (c.input.defined() && c.output.defined())
    FATHOM_CHECK(c.input.dtype() == c.output.dtype(), op, ": input is ", dtype_name(c.input.dtype()),
                 " but output is ", dtype_name(c.output.dtype()), "; both must have the same dtype");
  const int64_t in = c.input.defined() ? c.input.numel() : 0;
  const int64_t out = c.output.defined() ? c.output.numel() : 0;
  switch (c.kind) {
    case CollectiveKind::ReduceScatter:
      FATHOM_CHECK(in == out * size_, op, ": the input must hold ", size_, " shards of the output's ", out,
                   " elements (", out * size_, "), got ", in);
      break;
    case CollectiveKind::AllGather:
      FATHOM_CHECK(out == in * size_, op, ": the output must hold ", size_, " copies of the input's ", in,
                   " elements (", in * size_, "), got ", out);
      break;
    case CollectiveKind::AllGatherV:
    case CollectiveKind::ReduceScatterV:
      check_shard_counts(c, in, out);
      break;
    case CollectiveKind::AllToAll:
      FATHOM_CHECK(in == out && in % size_ == 0, op, ": input and output must hold ", size_,
                   " equal chunks each, got ", in, " and ", out, " elements");
      break;
    case CollectiveKind::Broadcast:
      FATHOM_CHECK(c.root >= 0 && c.root < size_, op, ": root ", c.root, " is not a rank of communicator \"",
                   name_, "\" (size ", size_, ")");
      break;
    case CollectiveKind::Send:
    case CollectiveKind::Recv:
      FATHOM_CHECK(c.peer >= 0 && c.peer < size_ && c.peer != rank_, op, ": peer ", c.peer,
                   " must be another rank of communicator \"", name_, "\" (size ", size_, ", this rank ", rank_, ")");
      FATHOM_CHECK(c.tag >= 0, op, ": tag must be >= 0, got ", c.tag);
      break;
    default: break;
  }
  FATHOM_CHECK(!(blocking && open_groups_ > 0), "blocking ", op, " on communicator \"", name_,
               "\" inside a CollectiveGroup: the group launches its collectives only when it closes, so ",
               "this would wait forever; issue the async form, or close the group first");
  c.sequence = ++sequence_;
  return start(std::move(c), blocking);
}

CollectiveGroup::CollectiveGroup(Communicator& communicator) : communicator_(&communicator) {
  if (communicator_->open_groups_ == 0) communicator_->begin_group();  // may throw: then no group is open
  ++communicator_->open_groups_;
}

void CollectiveGroup::close() {
  if (communicator_ == nullptr) return;
  Communicator& communicator = *std::exchange(communicator_, nullptr);
  if (--communicator.open_groups_ == 0) communicator.end_group();
}

CollectiveGroup::~CollectiveGroup() {
  try {
    close();
  } catch (const std::exception& error) {
    abort_job(std::string("closing a collective group failed: ") + error.what());
  }
}

namespace {
Collective collective(CollectiveKind kind, const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::Sum) {
  Collective c;
  c.kind = kind;
  c.input = input;
  c.output = output;
  c.op = op;
  return c;
}
Collective uneven(CollectiveKind kind, const Tensor& input, const Tensor& output, std::vector<int64_t> counts,
                  ReduceOp op = ReduceOp::Sum) {
  Collective c = collective(kind, input, output, op);
  c.counts = std::move(counts);
  return c;
}
Collective broadcast_from(const Tensor& tensor, int root) {
  Collective c = collective(CollectiveKind::Broadcast, tensor, tensor);
  c.root = root;
  return c;
}
Collective point_to_point(CollectiveKind kind, const Tensor& tensor, int peer, int tag) {
  Collective c = kind == CollectiveKind::Send ? collective(kind, tensor, Tensor()) : collective(kind, Tensor(), tensor);
  c.peer = peer;
  c.tag = tag;
  return c;
}
}  // namespace

WorkHandle Communicator::all_reduce_async(const Tensor& tensor, ReduceOp op) {
  return issue(collective(CollectiveKind::AllReduce, tensor, tensor, op), false);
}
void Communicator::all_reduce(const Tensor& tensor, ReduceOp op) {
  issue(collective(CollectiveKind::AllReduce, tensor, tensor, op), true)->wait();
}
WorkHandle Communicator::reduce_scatter_async(const Tensor& input, const Tensor& output, ReduceOp op) {
  return issue(collective(CollectiveKind::ReduceScatter, input, output, op), false);
}
void Communicator::reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) {
  issue(collective(CollectiveKind::ReduceScatter, input, output, op), true)->wait();
}
WorkHandle Communicator::all_gather_async(const Tensor& input, const Tensor& output) {
  return issue(collective(CollectiveKind::AllGather, input, output), false);
}
void Communicator::all_gather(const Tensor& input, const Tensor& output) {
  issue(collective(CollectiveKind::AllGather, input, output), true)->wait();
}
WorkHandle Communicator::all_gather_v_async(const Tensor& input, const Tensor& output, std::vector<int64_t> counts) {
  return issue(uneven(CollectiveKind::AllGatherV, input, output, std::move(counts)), false);
}
void Communicator::all_gather_v(const Tensor& input, const Tensor& output, std::vector<int64_t> counts) {
  issue(uneven(CollectiveKind::AllGatherV, input, output, std::move(counts)), true)->wait();
}
WorkHandle Communicator::reduce_scatter_v_async(const Tensor& input, const Tensor& output,
                                                std::vector<int64_t> counts, ReduceOp op) {
  return issue(uneven(CollectiveKind::ReduceScatterV, input, output, std::move(counts), op), false);
}
void Communicator::reduce_scatter_v(const Tensor& input, const Tensor& output, std::vector<int64_t> counts,
                                    ReduceOp op) {
  issue(uneven(CollectiveKind::ReduceScatterV, input, output, std::move(counts), op), true)->wait();
}
WorkHandle Communicator::broadcast_async(const Tensor& tensor, int root) {
  return issue(broadcast_from(tensor, root), false);
}
WorkHandle Communicator::all_to_all_async(const Tensor& input, const Tensor& output) {
  return issue(collective(CollectiveKind::AllToAll, input, output), false);
}
void Communicator::all_to_all(const Tensor& input, const Tensor& output) {
  issue(collective(CollectiveKind::AllToAll, input, output), true)->wait();
}
void Communicator::broadcast(const Tensor& tensor, int root) { issue(broadcast_from(tensor, root), true)->wait(); }
WorkHandle Communicator::send_async(const Tensor& tensor, int peer, int tag) {
  return issue(point_to_point(CollectiveKind::Send, tensor, peer, tag), false);
}
void Communicator::send(const Tensor& tensor, int peer, int tag) {
  issue(point_to_point(CollectiveKind::Send, tensor, peer, tag), true)->wait();
}
WorkHandle Communicator::recv_async(const Tensor& tensor, int peer, int tag) {
  return issue(point_to_point(CollectiveKind::Recv, tensor, peer, tag), false);
}
void Communicator::recv(const Tensor& tensor, int peer, int tag) {
  issue(point_to_point(CollectiveKind::Recv, tensor, peer, tag), true)->wait();
}
void Communicator::barrier() { issue(collective(CollectiveKind::Barrier, Tensor(), Tensor()), true)->wait(); }

double Communicator::all_reduce_scalar(double value, ReduceOp op) {
  Tensor scalar = Tensor::scalar(value, DType::F64).to(device());
  all_reduce(scalar, op);
  return scalar.to(kCPU).item();
}

}  // namespace fathom::parallel
