#include "engine/pipeline_executor.h"

#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/logging.h"
#include "parallel/collective_signature.h"
#include "parallel/comm_worker.h"
#include "parallel/job_abort.h"
#include "autograd/grad_mode.h"
#include "parallel/pipeline_module.h"
#include "parallel/pipeline_transport.h"
#include "parallel/rank_agreement.h"

namespace fathom {

using parallel::PipeInstruction;
using parallel::PipeOp;

namespace {

// Tags keep the three kinds of message apart; within a kind and a pair of stages messages
// arrive in the order they were sent (MPI's non-overtaking rule, NCCL's ordering), which the
// schedule checker makes sure is the order they are received.
constexpr int kHeaderTag = 1, kActivationTag = 2, kSampleIndexTag = 3, kGradientTag = 4;
constexpr int kMaxDims = 8;

// What crosses one virtual-stage boundary this step.
struct Header {
  DType dtype = DType::F32;
  Shape shape;
  bool needs_gradient = false;
  int64_t sample_rows = 0;   // 0: no sample indices follow
  bool partitioned = false;  // each tensor rank sends its 1/tp (pipe_partitioned)

  static constexpr int64_t kWords = 5 + kMaxDims;
  Tensor encode() const {
    FATHOM_CHECK(static_cast<int64_t>(shape.size()) <= kMaxDims, "pipeline: activations of at most ", kMaxDims,
                 " dimensions, got ", shape_str(shape));
    std::vector<int64_t> words(kWords, 0);
    words[0] = static_cast<int64_t>(dtype);
    words[1] = static_cast<int64_t>(shape.size());
    words[2] = needs_gradient ? 1 : 0;
    words[3] = sample_rows;
    words[4] = partitioned ? 1 : 0;
    for (size_t d = 0; d < shape.size(); ++d) words[5 + d] = shape[d];
    return Tensor::from_vector(words, {kWords});
  }
  static Header decode(const Tensor& t) {
    const std::vector<int64_t> words = t.to_vector<int64_t>();
    Header h;
    h.dtype = static_cast<DType>(words[0]);
    h.shape.assign(words.begin() + 5, words.begin() + 5 + words[1]);
    h.needs_gradient = words[2] != 0;
    h.sample_rows = words[3];
    h.partitioned = words[4] != 0;
    return h;
  }
};

// One micro-batch on one chunk of this stage.
struct Unit {
  autograd::Variable input;  // the batch's inputs (first virtual stage) or the received activation
  Tensor sample_index;
  autograd::Variable output;  // the activation to send, or the loss (last virtual stage)
  Batch batch;                // the first and last virtual stages
  Tensor gradient;            // received from the next stage
  bool input_needs_gradient = false;
  autograd::DeferredAccumulation weights;  // zero bubble: B's held parameter gradients
};

// One step's execution of the program.
class StepRun {
 public:
  StepRun(Engine& engine, parallel::PipelineModule& module, const parallel::PipeShape& shape, const NextBatch& next,
          const LossFunction& loss, StageTransfers transfers)
      : engine_(engine), module_(module), shape_(shape), next_(next), loss_(loss),
        device_(module.device()),
        comm_(module.groups().for_device(parallel::Axis::Pipeline, device_)),
        tensor_(module.groups().for_device(parallel::Axis::Tensor, device_)),
        staged_(device_.is_cuda() && std::string(comm_->backend()) == "mpi"),
        transfers_(tensor_->size() > 1 ? transfers : StageTransfers{}) {}

  void compute(const PipeInstruction& i, bool boundary);
  void exchange(const std::vector<PipeInstruction>& transfers);
  void reduce_tied();
  // The step's sends, which complete in the background, must be done before it ends.
  void finish_sends() { await(sends_); }

 private:
  int stage() const { return module_.stage(); }
  int last_virtual() const { return shape_.virtual_stages() - 1; }
  int next_stage() const { return (stage() + 1) % shape_.stages; }
  int previous_stage() const { return (stage() + shape_.stages - 1) % shape_.stages; }
  Unit& unit(const PipeInstruction& i) { return units_[{i.micro_batch, i.chunk}]; }
  std::string where(const PipeInstruction& i) const {
    return detail::concat("pipeline stage ", stage(), shape_.chunks > 1 ? detail::concat(" chunk ", i.chunk) : "",
                          ", micro-batch ", i.micro_batch);
  }
  struct Posted {
    parallel::WorkHandle work;
    std::string what;
  };
  void forward(const PipeInstruction& i);
  // Waits for every transfer; a stuck one ends the job with what it was (the other stage may be
  // waiting for something this one never posts, so an exception would only leave it hanging).
  void await(std::vector<Posted>& transfers) const;
  Tensor wire(const Tensor& t) const { return staged_ ? t.to(kCPU).contiguous() : t.contiguous(); }
  // pipe_partitioned / grad_partitioned: this tensor rank's 1/tp of a tensor every tensor rank
  // holds whole, and the whole again from every tensor rank's part (collective over the group).
  std::vector<int64_t> part_counts(int64_t numel) const {
    std::vector<int64_t> counts;
    for (int r = 0; r < tensor_->size(); ++r) counts.push_back(nn::shard_range(numel, tensor_->size(), r).length);
    return counts;
  }
  Tensor part_of(const Tensor& whole) const {
    const nn::ShardRange mine = nn::shard_range(whole.numel(), tensor_->size(), tensor_->rank());
    return whole.contiguous().view({-1}).narrow(0, mine.offset, mine.length);
  }
  Tensor whole_of(const Tensor& part, const Shape& shape) const {
    Tensor whole = Tensor::empty(shape, part.dtype(), part.device());
    tensor_->all_gather_v(part.contiguous(), whole.view({-1}), part_counts(whole.numel()));
    return whole;
  }
  Tensor from_wire(const Tensor& t) const { return staged_ ? t.to(device_) : t; }
  Tensor empty_on_wire(const Shape& shape, DType dtype) const {
    return Tensor::empty(shape, dtype, staged_ ? kCPU : device_);
  }

  Engine& engine_;
  parallel::PipelineModule& module_;
  const parallel::PipeShape& shape_;
  const NextBatch& next_;
  const LossFunction& loss_;
  Device device_;
  std::shared_ptr<parallel::Communicator> comm_, tensor_;
  bool staged_;  // device tensors over MPI: through host memory
  StageTransfers transfers_;
  std::map<std::pair<int, int>, Unit> units_;
  std::map<int, Header> sent_, received_;  // headers by sending virtual stage, this step
  std::vector<Posted> sends_;
};

void StepRun::await(std::vector<Posted>& transfers) const {
  const auto timeout = parallel::collective_timeout();
  const auto start = std::chrono::steady_clock::now();
  for (Posted& p : transfers) {
    while (!p.work->test()) {
      if (std::chrono::steady_clock::now() - start > timeout)
        parallel::abort_job(detail::concat("pipeline stage ", stage(), ": ", p.what, " did not complete within ",
                                           timeout.count(), " s (FATHOM_COMM_TIMEOUT); the neighbouring stage is "
                                           "not running the same schedule, or failed"));
      std::this_thread::yield();
    }
    p.work->wait();  // rethrows a failed transfer
  }
  transfers.clear();
}

void StepRun::forward(const PipeInstruction& i) {
  Unit& u = unit(i);
  const int v = module_.virtual_stage(i.chunk);
  if (v == 0) {
    u.batch = next_();
    u.input = autograd::Variable(u.batch.inputs.to(device_));
    u.sample_index = u.batch.sample_index;
  } else if (v == last_virtual()) {
    u.batch = next_();  // for the targets
  }
  module_.set_chunk(i.chunk);
  autograd::Variable out;
  try {
    out = engine_(u.input, u.sample_index);
  } catch (const Error& e) {
    if (v == 0) throw;
    FATHOM_FAIL(where(i), " (layers [", module_.boundaries()[v], ", ", module_.boundaries()[v + 1],
                ")): forward of the ", dtype_name(u.input.dtype()), " activation ", shape_str(u.input.sizes()),
                " received from stage ", previous_stage(), " failed: ", e.message());
  }
  u.output = v == last_virtual() ? loss_(out, u.batch) : out;
  u.batch.inputs = Tensor();  // the tokens are not needed again
}

void StepRun::compute(const PipeInstruction& i, bool boundary) {
  if (i.op == PipeOp::Forward) return forward(i);
  Unit& u = unit(i);
  engine_.set_gradient_accumulation_boundary(boundary);
  if (i.op == PipeOp::BackwardWeight) return engine_.backward_weights(u.weights);
  // An output that needs no gradient: nothing of this stage's took part in it.
  if (!u.output.defined() || !u.output.requires_grad()) return;
  const autograd::Variable input = u.input_needs_gradient ? u.input : autograd::Variable();
  engine_.backward_stage(u.output, u.gradient, input, i.op == PipeOp::BackwardInput ? &u.weights : nullptr);
  u.output = autograd::Variable();  // the graph is spent
  u.gradient = Tensor();
}

void StepRun::exchange(const std::vector<PipeInstruction>& transfers) {
  std::vector<Posted> posted;  // the receives, waited for before the next computation
  const auto post_send = [&](const Tensor& t, int peer, int tag, std::string what) {
    sends_.push_back({comm_->send_async(wire(t), peer, tag), std::move(what)});
  };
  const auto post_recv = [&](const Tensor& buffer, int peer, int tag, std::string what) {
    posted.push_back({comm_->recv_async(buffer, peer, tag), std::move(what)});
  };
  for (const PipeInstruction& i : transfers) {
    Unit& u = unit(i);
    const int v = module_.virtual_stage(i.chunk);
    switch (i.op) {
      case PipeOp::SendActivation: {
        if (!sent_.count(v)) {
          const Header h{u.output.dtype(), u.output.sizes(), u.output.requires_grad(),
                         u.sample_index.defined() ? u.sample_index.numel() : 0, transfers_.partition_activations};
          sent_[v] = h;
          post_send(h.encode(), next_stage(), kHeaderTag, "the activation header to stage " + std::to_string(next_stage()));
        }
        const Header& h = sent_[v];
        FATHOM_CHECK(u.output.sizes() == h.shape && u.output.dtype() == h.dtype, where(i), ": the activation ",
                     dtype_name(u.output.dtype()), " ", shape_str(u.output.sizes()), " differs from this step's first (",
                     dtype_name(h.dtype), " ", shape_str(h.shape), "); every micro-batch of a step must have one shape");
        post_send(h.partitioned ? part_of(u.output.data()) : u.output.data(), next_stage(), kActivationTag,
                  "the activation of micro-batch " + std::to_string(i.micro_batch) + " to stage " +
                      std::to_string(next_stage()));
        if (h.sample_rows > 0)
          post_send(u.sample_index, next_stage(), kSampleIndexTag, "the sample indices to stage " +
                                                                       std::to_string(next_stage()));
        if (!h.needs_gradient) u.output = autograd::Variable();
        break;
      }
      case PipeOp::RecvActivation: {
        if (!received_.count(v - 1)) {
          // Needed before the activation's buffer can be posted.
          Tensor header = Tensor::empty({Header::kWords}, DType::I64);
          std::vector<Posted> first{{comm_->recv_async(header, previous_stage(), kHeaderTag),
                                     "the activation header from stage " + std::to_string(previous_stage())}};
          await(first);
          received_[v - 1] = Header::decode(header);
        }
        const Header& h = received_[v - 1];
        Tensor activation = h.partitioned ? empty_on_wire({part_counts(shape_numel(h.shape))[tensor_->rank()]}, h.dtype)
                                          : empty_on_wire(h.shape, h.dtype);
        post_recv(activation, previous_stage(), kActivationTag,
                  "the activation of micro-batch " + std::to_string(i.micro_batch) + " from stage " +
                      std::to_string(previous_stage()));
        u.input = autograd::Variable(activation, false);
        u.input_needs_gradient = h.needs_gradient;
        if (h.sample_rows > 0) {
          u.sample_index = Tensor::empty({h.sample_rows}, DType::I64);
          post_recv(u.sample_index, previous_stage(), kSampleIndexTag,
                    "the sample indices from stage " + std::to_string(previous_stage()));
        }
        break;
      }
      case PipeOp::SendGradient: {
        if (!u.input_needs_gradient) break;
        Tensor gradient = u.input.grad();
        if (!gradient.defined()) gradient = Tensor::zeros(u.input.sizes(), u.input.dtype(), u.input.device());
        post_send(transfers_.partition_gradients ? part_of(gradient) : gradient, previous_stage(), kGradientTag,
                  "the gradient of micro-batch " + std::to_string(i.micro_batch) + " to stage " +
                      std::to_string(previous_stage()));
        u.input = autograd::Variable();
        break;
      }
      case PipeOp::RecvGradient: {
        if (!u.output.defined() || !u.output.requires_grad()) break;
        u.gradient = transfers_.partition_gradients
                         ? empty_on_wire({part_counts(u.output.numel())[tensor_->rank()]}, u.output.dtype())
                         : empty_on_wire(u.output.sizes(), u.output.dtype());
        post_recv(u.gradient, next_stage(), kGradientTag,
                  "the gradient of micro-batch " + std::to_string(i.micro_batch) + " from stage " +
                      std::to_string(next_stage()));
        break;
      }
      default: FATHOM_FAIL("pipeline: ", i.str(), " is not a transfer");
    }
  }
  await(posted);
  // Partitioned transfers are made whole again over the tensor group, in program order, which is
  // the same on every tensor rank of the stage.
  for (const PipeInstruction& i : transfers) {
    Unit& u = unit(i);
    if (i.op == PipeOp::RecvActivation) {
      const Header& h = received_[module_.virtual_stage(i.chunk) - 1];
      const Tensor arrived = from_wire(u.input.data());
      u.input = autograd::Variable(h.partitioned ? whole_of(arrived, h.shape) : arrived, u.input_needs_gradient);
    } else if (i.op == PipeOp::RecvGradient && u.gradient.defined()) {
      const Tensor arrived = from_wire(u.gradient);
      u.gradient = transfers_.partition_gradients ? whole_of(arrived, u.output.sizes()) : arrived;
    }
  }
}

void StepRun::reduce_tied() {
  for (const parallel::PipelineModule::TiedCopies& tie : module_.ties())
    engine_.training_state().sum_tied_gradients(*tie.group, {tie.parameter});
}

}  // namespace

PipelineExecutor::PipelineExecutor(parallel::PipeScheduleKind kind, const parallel::PipelineModule& module,
                                   int micro_batches, StageTransfers transfers)
    : kind_(kind), shape_{module.num_stages(), micro_batches, module.chunks()}, transfers_(transfers),
      stage_(module.stage()) {
  const std::vector<parallel::StageProgram> programs = parallel::make_pipe_schedule(kind, shape_);
  parallel::check_pipe_schedule(programs, shape_);
  program_ = programs[stage_];
  if (micro_batches < shape_.stages && stage_ == 0 && module.groups().coord().data == 0 &&
      module.groups().coord().tensor == 0)
    FATHOM_LOG(Warning, detail::concat("pipeline: ", micro_batches, " micro-batches (gradient_accumulation_steps) for ",
                                       shape_.stages, " stages: at least ", shape_.stages - micro_batches,
                                       " stages are idle at any time; use gradient_accumulation_steps >= ",
                                       shape_.stages, " (the bubble is (p - 1) / m of the ideal step time)"));
  for (size_t k = 0; k < program_.size(); ++k)
    if (program_[k].op == PipeOp::Backward || program_[k].op == PipeOp::BackwardWeight) last_parameter_backward_ = k;
}

PipelineExecutor::~PipelineExecutor() = default;

void PipelineExecutor::run(Engine& engine, const NextBatch& next, const LossFunction& loss) {
  auto* module = dynamic_cast<parallel::PipelineModule*>(&engine.module());
  FATHOM_CHECK(module != nullptr, "PipelineExecutor: the engine's model is a ", engine.module().type_name(),
               ", not a parallel::PipelineModule");
  // Debug mode: every stage must run the same schedule over the same shape; stages that do not
  // would wait for transfers that never come (found here by name, not by the timeout).
  if (parallel::comm_debug_enabled()) {
    const std::string schedule =
        detail::concat(parallel::pipe_schedule_name(kind_), ", ", shape_.stages, " stages, ", shape_.micro_batches,
                       " micro-batches, ", shape_.chunks, " chunks per stage");
    FATHOM_CHECK(parallel::same_on_every_rank(module->groups().pipeline(), schedule),
                 "pipeline (FATHOM_COMM_DEBUG): the stages run different schedules; stage ", stage_, " runs ", schedule,
                 ": give every rank the same pipeline config and gradient_accumulation_steps");
  }
  StepRun run(engine, *module, shape_, next, loss, transfers_);
  recorded_.clear();
  const auto step_start = std::chrono::steady_clock::now();
  const auto now_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_start).count();
  };
  for (size_t k = 0; k < program_.size();) {
    const PipeInstruction& i = program_[k];
    const double start = recording_ ? now_ms() : 0;
    if (i.is_transfer()) {
      std::vector<PipeInstruction> transfers;
      while (k < program_.size() && program_[k].is_transfer()) transfers.push_back(program_[k++]);
      run.exchange(transfers);
      if (recording_)
        for (const PipeInstruction& t : transfers) recorded_.push_back({t, start, now_ms()});
      continue;
    }
    if (i.is_compute()) {
      run.compute(i, k == last_parameter_backward_);
    } else if (i.op == PipeOp::ReduceTied) {
      run.reduce_tied();
    } else if (i.op == PipeOp::OptimizerStep) {
      run.finish_sends();
      engine.set_gradient_accumulation_boundary(std::nullopt);
      engine.optimizer_step();
    }
    if (recording_) recorded_.push_back({i, start, now_ms()});
    ++k;
  }
}

double pipeline_loss(parallel::PipelineModule& module, const Batch& batch, const LossFunction& loss) {
  autograd::NoGradGuard no_grad;
  parallel::Communicator& pipeline = module.groups().pipeline();
  const int stages = module.num_stages(), last = module.num_virtual_stages() - 1;
  const Device device = module.device();
  constexpr int kTag = 12;
  double value = 0;
  autograd::Variable x;
  for (int v = 0; v <= last; ++v) {
    if (v % stages != module.stage()) continue;
    x = v == 0 ? autograd::Variable(batch.inputs.to(device))
               : autograd::Variable(parallel::recv_tensor(pipeline, (v - 1) % stages, kTag).to(device));
    module.set_chunk(v / stages);
    const autograd::Variable out = module(x);
    if (v == last) value = loss(out, batch).item();
    else parallel::send_tensor(pipeline, out.data(), (v + 1) % stages, kTag);
  }
  return pipeline.all_reduce_scalar(module.stage() == last % stages ? value : 0.0, parallel::ReduceOp::Sum);
}

}  // namespace fathom
