#include "engine/monitor/trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "autograd/custom_function.h"
#include "autograd/hook_handle.h"
#include "core/cuda/cuda_runtime.h"
#include "core/json_writer.h"
#include "core/memory_stats.h"
#include "engine/monitor/step_report.h"
#include "engine/monitor/output_folder.h"
#include "parallel/collective_observer.h"

namespace fathom {

// One complete ("X") event on a track of this rank.
struct TraceSpan {
  std::string name, category;
  int track = 0;
  double begin_us = 0, end_us = 0;
  std::vector<std::pair<std::string, std::string>> args;  // string-valued
};

constexpr int kComputeTrack = 1;

class StepTrace::Recorder final : public parallel::CollectiveObserver {
 public:
  explicit Recorder(Device device) : device_(device) {}

  void set_origin() { origin_ = std::chrono::steady_clock::now(); }
  // Microseconds since the origin; on a GPU after the work queued so far has run.
  double now_us() const {
    if (device_.is_cuda()) cuda::synchronize_device(device_.index);
    return us_at(std::chrono::steady_clock::now());
  }
  double us_at(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  }

  void add(TraceSpan span) {
    std::lock_guard lock(mutex_);
    spans_.push_back(std::move(span));
  }

  void on_collective(const parallel::CollectiveSpan& c) override {
    TraceSpan span{parallel::collective_name(c.kind), "communication", 0, us_at(c.begin), us_at(c.end),
                   {{"group", c.group + " (" + std::to_string(c.group_size) + " ranks)"},
                    {"bytes", format_bytes(static_cast<double>(c.bytes))},
                    {"dtype", dtype_name(c.dtype)},
                    {"sequence", std::to_string(c.sequence)}}};
    std::lock_guard lock(mutex_);
    auto [it, added] = tracks_.try_emplace(c.group, 0);
    if (added) it->second = kComputeTrack + static_cast<int>(tracks_.size());
    span.track = it->second;
    spans_.push_back(std::move(span));
  }

  // This rank's events and track names as JSON array elements (no brackets).
  std::string json(int rank, const std::string& device) const {
    std::lock_guard lock(mutex_);
    JsonWriter w;
    w.begin_array();
    const auto metadata = [&](const char* name, int tid, const std::string& value) {
      w.begin_object(JsonWriter::Layout::Inline).member("ph", "M").member("name", name).member("pid", rank);
      w.member("tid", tid).key("args").begin_object(JsonWriter::Layout::Inline).member("name", value).end_object();
      w.end_object();
    };
    metadata("process_name", 0, "rank " + std::to_string(rank));
    metadata("thread_name", kComputeTrack, "compute (" + device + ")");
    for (const auto& [group, track] : tracks_) metadata("thread_name", track, "communication: " + group);
    for (const TraceSpan& s : spans_) {
      w.begin_object(JsonWriter::Layout::Inline).member("ph", "X").member("name", s.name).member("cat", s.category);
      // Nanosecond resolution is all a steady clock gives; fewer digits keep the file small.
      const auto rounded = [](double us) { return std::round(us * 1e3) / 1e3; };
      w.member("pid", rank).member("tid", s.track).member("ts", rounded(s.begin_us));
      w.member("dur", rounded(std::max(0.0, s.end_us - s.begin_us)));
      w.key("args").begin_object(JsonWriter::Layout::Inline);
      for (const auto& [key, value] : s.args) w.member(key, value);
      w.end_object().end_object();
    }
    w.end_array();
    std::string text = w.str();
    // The elements only: the first rank joins every rank's lists into one.
    const size_t open = text.find('['), close = text.rfind(']');
    return text.substr(open + 1, close - open - 1);
  }

 private:
  Device device_;
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  mutable std::mutex mutex_;
  std::vector<TraceSpan> spans_;
  std::map<std::string, int> tracks_;
};

namespace {
// One call of a module's forward, and the backward span it leads to.
struct ModuleCall {
  size_t module = 0;
  double backward_begin = -1;
  bool closed = false;
};

// An identity in forward whose backward calls `reached` (when the gradient gets there).
class BackwardMark final : public autograd::Function {
 public:
  explicit BackwardMark(std::function<void()> reached) : reached_(std::move(reached)) {}
  std::string name() const override { return "trace_mark"; }
  autograd::TensorList forward(const autograd::TensorList& inputs) override { return inputs; }
  autograd::TensorList backward(const autograd::TensorList& grads) override {
    reached_();
    return grads;
  }

 private:
  std::function<void()> reached_;
};

// Wraps the entries of `values` that need a gradient in one BackwardMark.
void mark(autograd::VariableList& values, std::function<void()> reached) {
  autograd::VariableList needing;
  std::vector<size_t> where;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].defined() && values[i].requires_grad()) needing.push_back(values[i]), where.push_back(i);
  if (needing.empty()) return;
  const autograd::VariableList marked = autograd::apply_function(std::make_shared<BackwardMark>(std::move(reached)), needing);
  for (size_t i = 0; i < where.size(); ++i) values[where[i]] = marked[i];
}
}  // namespace

struct StepTrace::Attachments {
  std::vector<std::string> names;  // per module: "transformer.h.0.attn (CausalSelfAttention)"
  std::vector<autograd::HookHandle> hooks;
  std::unique_ptr<parallel::CollectiveObservation> observation;
  std::vector<std::pair<size_t, double>> forward_stack;        // (module, begin)
  std::map<size_t, std::vector<std::shared_ptr<ModuleCall>>> calls_in_forward;  // pre-hook -> post-hook
  std::map<size_t, std::vector<std::shared_ptr<ModuleCall>>> closing_at_parameters;
  std::vector<std::shared_ptr<ModuleCall>> open;  // backward spans begun or awaited
  double phase_begin = 0;
};

StepTrace::StepTrace(nn::Module& model, TraceOptions options, std::shared_ptr<parallel::Communicator> world)
    : model_(model), options_(std::move(options)), world_(std::move(world)),
      recorder_(std::make_shared<Recorder>(model.device())) {
  FATHOM_CHECK(world_ != nullptr, "trace: no world communicator");
  FATHOM_CHECK(options_.first_step >= 1 && options_.first_step <= options_.last_step,
               "trace: steps must be [first, last] with 1 <= first <= last, got [", options_.first_step, ", ",
               options_.last_step, "]");
  if (world_->rank() == 0) create_output_folder(options_.output_path, "trace", "output_path");  // fail before training
}

StepTrace::~StepTrace() = default;

std::string StepTrace::path() const {
  return (std::filesystem::path(options_.output_path.empty() ? "." : options_.output_path) / "trace.json").string();
}

void StepTrace::begin_tracing() {
  world_->barrier();  // every rank's time zero at (nearly) the same instant
  recorder_->set_origin();
  attached_ = std::make_unique<Attachments>();
  Attachments& a = *attached_;
  const auto modules = model_.named_modules();
  Recorder& recorder = *recorder_;
  for (size_t m = 0; m < modules.size(); ++m) {
    const auto& [name, module] = modules[m];
    a.names.push_back(name.empty() ? module->type_name() : name + " (" + module->type_name() + ")");
    const auto close = [this, &recorder](ModuleCall& call) {
      if (call.closed || call.backward_begin < 0) return;
      call.closed = true;
      recorder.add({attached_->names[call.module], "backward", kComputeTrack, call.backward_begin, recorder.now_us(), {}});
    };
    a.hooks.push_back(module->register_forward_pre_hook([this, m, close, &recorder](nn::Module&, autograd::VariableList& in) {
      Attachments& at = *attached_;
      at.forward_stack.push_back({m, recorder.now_us()});
      auto call = std::make_shared<ModuleCall>(ModuleCall{m});
      at.calls_in_forward[m].push_back(call);
      at.open.push_back(call);
      const bool input_gradient = std::any_of(in.begin(), in.end(), [](const autograd::Variable& v) {
        return v.defined() && v.requires_grad();
      });
      if (input_gradient) mark(in, [call, close] { close(*call); });  // its input's gradient: the span ends
      else at.closing_at_parameters[m].push_back(call);
    }));
    a.hooks.push_back(module->register_forward_hook(
        [this, m, &recorder](nn::Module&, const autograd::VariableList&, autograd::VariableList& out) {
          Attachments& at = *attached_;
          const auto [module_index, begin] = at.forward_stack.back();
          at.forward_stack.pop_back();
          recorder.add({at.names[module_index], "forward", kComputeTrack, begin, recorder.now_us(), {}});
          const std::shared_ptr<ModuleCall> call = at.calls_in_forward[m].back();
          at.calls_in_forward[m].pop_back();
          mark(out, [call, &recorder] {  // its output's gradient arrives: the span begins
            if (call->backward_begin < 0) call->backward_begin = recorder.now_us();
          });
        }));
    // A module whose inputs need no gradient ends its backward when its own parameters' do.
    for (const auto& [param_name, param] : module->named_parameters(/*recurse=*/false))
      a.hooks.push_back(param.add_grad_ready_hook([this, m, close](const autograd::Variable&) {
        auto& waiting = attached_->closing_at_parameters[m];
        for (const auto& call : waiting) close(*call);
      }));
  }
  a.observation = std::make_unique<parallel::CollectiveObservation>(recorder_);
}

void StepTrace::finish_tracing() {
  attached_.reset();
  finished_ = true;
  const std::string device = model_.device().str();
  const std::string mine = recorder_->json(world_->rank(), device);
  // Every rank's events to the first: lengths, then the bytes (packed into i64 for the collective).
  const int n = world_->size();
  Tensor length = Tensor::scalar(static_cast<double>(mine.size()), DType::I64).reshape({1});
  Tensor lengths = Tensor::zeros({n}, DType::I64);
  world_->all_gather(length, lengths);
  const auto* sizes = static_cast<const int64_t*>(lengths.raw_data());
  std::vector<int64_t> counts;
  for (int r = 0; r < n; ++r) counts.push_back((sizes[r] + 7) / 8);
  Tensor packed = Tensor::zeros({counts[world_->rank()]}, DType::I64);
  std::memcpy(packed.raw_data(), mine.data(), mine.size());
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  Tensor all = Tensor::zeros({total}, DType::I64);
  world_->all_gather_v(packed, all, counts);
  if (world_->rank() != 0) return;
  std::string events;
  const char* bytes = static_cast<const char*>(all.raw_data());
  int64_t offset = 0;
  for (int r = 0; r < n; ++r) {
    const std::string part(bytes + offset * 8, static_cast<size_t>(sizes[r]));
    if (!part.empty()) events += (events.empty() ? "" : ",") + part;
    offset += counts[r];
  }
  const std::filesystem::path file = path();
  std::ofstream out(file);
  out << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"clock\": \"microseconds since a barrier at the start of step "
      << options_.first_step << " on every rank\"},\n\"traceEvents\": [" << events << "]}\n";
  FATHOM_CHECK(out.good(), "trace: cannot write ", file.string(), "; check output_path");
}

void StepTrace::begin_step(Engine&, int64_t step) {
  if (!finished_ && !attached_ && traced(step)) begin_tracing();
}

void StepTrace::before_forward(Engine&, int64_t step) {
  if (!attached_ || !traced(step)) return;
  attached_->phase_begin = recorder_->now_us();
}

void StepTrace::after_forward(Engine&, int64_t step) {
  if (!attached_ || !traced(step)) return;
  recorder_->add({"forward", "phase", kComputeTrack, attached_->phase_begin, recorder_->now_us(),
                  {{"step", std::to_string(step)}}});
}

void StepTrace::before_backward(Engine&, int64_t step) {
  if (attached_ && traced(step)) attached_->phase_begin = recorder_->now_us();
}

void StepTrace::after_backward(Engine&, int64_t step) {
  if (!attached_ || !traced(step)) return;
  Attachments& a = *attached_;
  const double end = recorder_->now_us();
  // Spans whose end was never seen (the model itself: its input needs no gradient).
  for (const auto& call : a.open)
    if (!call->closed && call->backward_begin >= 0)
      recorder_->add({a.names[call->module], "backward", kComputeTrack, call->backward_begin, end, {}});
  a.open.clear();
  a.closing_at_parameters.clear();
  recorder_->add({"backward", "phase", kComputeTrack, a.phase_begin, end, {{"step", std::to_string(step)}}});
}

void StepTrace::before_optimizer_step(Engine&, int64_t step) {
  if (attached_ && traced(step)) attached_->phase_begin = recorder_->now_us();
}

void StepTrace::after_optimizer_step(Engine&, const StepReport& report) {
  if (!attached_ || !traced(report.step)) return;
  recorder_->add({"optimizer step", "phase", kComputeTrack, attached_->phase_begin, recorder_->now_us(),
                  {{"step", std::to_string(report.step)}}});
  if (report.step == options_.last_step) finish_tracing();
}

}  // namespace fathom
