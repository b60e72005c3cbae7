#include "engine/monitor/flops_profiler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/cuda/cuda_runtime.h"
#include "core/error.h"
#include "engine/monitor/step_report.h"
#include "engine/monitor/output_folder.h"

namespace fathom {
namespace {
double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

std::string fixed(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// "%-70s value": DeepSpeed's two-column summary lines.
std::string line(const std::string& label, const std::string& value) {
  char text[256];
  std::snprintf(text, sizeof text, "%-70s  %s\n", label.c_str(), value.c_str());
  return text;
}
}  // namespace

std::string format_count(double value, const std::string& unit) {
  const double a = std::fabs(value);
  const char* prefix = "";
  double scale = 1;
  if (a >= 1e12) prefix = "T", scale = 1e12;
  else if (a >= 1e9) prefix = "G", scale = 1e9;
  else if (a >= 1e6) prefix = "M", scale = 1e6;
  else if (a >= 1e3) prefix = "K", scale = 1e3;
  char text[64];
  std::snprintf(text, sizeof text, "%g %s%s", std::round(value / scale * 100) / 100, prefix, unit.c_str());
  std::string out = text;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string format_seconds(double seconds) {
  const double a = std::fabs(seconds);
  if (a >= 1 || a == 0) return fixed("%g s", std::round(seconds * 100) / 100);
  if (a >= 1e-3) return fixed("%g ms", std::round(seconds * 1e5) / 100);
  return fixed("%g us", std::round(seconds * 1e8) / 100);
}

FlopsProfiler::FlopsProfiler(nn::Module& model, FlopsProfilerOptions options, ProfiledJob job)
    : options_(std::move(options)), job_(job), device_(model.device()) {
  std::vector<const void*> seen;
  add_module(model, "", 0, seen);
  if (!options_.output_file.empty())  // as DeepSpeed, the file's folder is made; here before training
    create_output_folder(std::filesystem::path(options_.output_file).parent_path().string(), "flops_profiler",
                         "output_file");
}

void FlopsProfiler::add_module(nn::Module& module, const std::string& name, int depth, std::vector<const void*>& seen) {
  const size_t index = modules_.size();
  modules_.push_back({.name = name, .type = module.type_name(), .depth = depth});
  module_of_.push_back(&module);
  // A parameter counts once, in the first module that reaches it (a tied weight in its owner).
  for (const auto& [param_name, param] : module.named_parameters(/*recurse=*/false)) {
    const void* identity = param.impl().get();
    if (std::find(seen.begin(), seen.end(), identity) != seen.end()) continue;
    seen.push_back(identity);
    modules_[index].params += param.numel();
  }
  for (const auto& [child_name, child] : module.children()) {
    const size_t child_index = modules_.size();
    add_module(*child, child_name, depth + 1, seen);
    modules_[index].children.push_back(child_index);
  }
}

void FlopsProfiler::start() {
  stop();
  for (ModuleProfile& m : modules_) m.own_macs = m.own_flops = 0, m.own_ms = 0, m.called = false;
  stack_.clear();
  const auto sync = [this] {
    if (device_.is_cuda()) cuda::synchronize_device(device_.index);
  };
  for (size_t m = 0; m < modules_.size(); ++m) {
    hooks_.push_back(module_of_[m]->register_forward_pre_hook([this, m, sync](nn::Module&, autograd::VariableList&) {
      sync();
      stack_.push_back({m, now_ms()});
    }));
    hooks_.push_back(module_of_[m]->register_forward_hook(
        [this, sync](nn::Module&, const autograd::VariableList&, autograd::VariableList&) {
          sync();
          FATHOM_CHECK(!stack_.empty(), "flops profiler: a module's forward ended that never started");
          const Frame frame = stack_.back();
          stack_.pop_back();
          modules_[frame.module].own_ms += now_ms() - frame.start_ms;
          modules_[frame.module].called = true;
        }));
  }
  observing_ = std::make_unique<autograd::OpObserverScope>(static_cast<autograd::OpObserver*>(this));
}

void FlopsProfiler::stop() {
  observing_.reset();
  hooks_.clear();
}

void FlopsProfiler::on_op(const OpInfo& op, const TensorList& inputs, const TensorList& outputs,
                          const Attributes& attrs) {
  FATHOM_CHECK(op.cost, "flops profiler: op ", op.name, " declares no cost");
  const OpCost cost = op.cost(inputs, outputs, attrs);
  ModuleProfile& into = modules_[stack_.empty() ? 0 : stack_.back().module];
  into.own_macs += cost.macs;
  into.own_flops += cost.flops;
}

int64_t FlopsProfiler::sum_children(size_t m, int64_t (FlopsProfiler::*total)(size_t) const) const {
  int64_t sum = 0;
  for (size_t child : modules_[m].children) sum += (this->*total)(child);
  return sum;
}

int64_t FlopsProfiler::total_params(size_t m) const { return modules_[m].params + sum_children(m, &FlopsProfiler::total_params); }
int64_t FlopsProfiler::total_macs(size_t m) const { return modules_[m].own_macs + sum_children(m, &FlopsProfiler::total_macs); }
int64_t FlopsProfiler::total_flops(size_t m) const {
  return modules_[m].own_flops + sum_children(m, &FlopsProfiler::total_flops);
}

double FlopsProfiler::forward_ms(size_t m) const {
  if (modules_[m].called) return modules_[m].own_ms;
  double sum = 0;
  for (size_t child : modules_[m].children) sum += forward_ms(child);
  return sum;
}

std::string FlopsProfiler::report(int64_t step, const PhaseTimes& times) const {
  const double params = static_cast<double>(total_params());
  const double macs = static_cast<double>(total_macs()), flops = static_cast<double>(total_flops());
  const double fwd = times.forward_ms / 1e3, bwd = times.backward_ms / 1e3, opt = times.step_ms / 1e3;
  const double iter = fwd + bwd + opt;
  const double bwd_factor = 2.0 + options_.recompute_fwd_factor;
  const auto per_second = [](double work, double seconds) { return seconds > 0 ? work / seconds : 0.0; };
  const std::string factor = fixed("%g", bwd_factor), total_factor = fixed("%g", bwd_factor + 1);
  std::string out = "\n-------------------------- Fathom flops profiler --------------------------\n";
  out += "Profile summary at step " + std::to_string(step) + " (profile_step " + std::to_string(options_.profile_step) +
         ": the step after that many completed):\n";
  out +=
      "Notations: data parallel size (dp_size), model parallel size (mp_size), number of parameters (params),\n"
      "multiply-accumulate operations (MACs), floating-point operations (flops), flops per second (FLOPS),\n"
      "fwd/bwd latency (forward/backward pass), step latency (optimizer step), iter latency (their sum); "
      "one micro-batch\n\n";
  out += line("world size:", std::to_string(job_.world_size));
  out += line("data parallel size:", std::to_string(job_.data_parallel_size));
  out += line("model parallel size:", std::to_string(job_.model_parallel_size));
  out += line("batch size per rank:", std::to_string(job_.micro_batch_size));
  out += line("params per rank:", format_count(params));
  if (job_.pipeline_stages > 1) {
    out += line("pipeline stages:", std::to_string(job_.pipeline_stages));
    out += line("params of model = params of all stages * mp_size:",
                format_count(static_cast<double>(job_.params_of_all_stages) * job_.model_parallel_size));
  } else {
    out += line("params of model = params per rank * mp_size:", format_count(params * job_.model_parallel_size));
  }
  out += line("fwd MACs per rank:", format_count(macs, "MACs"));
  out += line("fwd flops per rank:", format_count(flops));
  out += line("fwd flops of model = fwd flops per rank * mp_size:", format_count(flops * job_.model_parallel_size));
  out += line("fwd latency:", format_seconds(fwd));
  out += line("fwd FLOPS per rank = fwd flops per rank / fwd latency:", format_count(per_second(flops, fwd), "FLOPS"));
  out += line("bwd latency:", format_seconds(bwd));
  out += line("bwd FLOPS per rank = " + factor + " * fwd flops per rank / bwd latency:",
              format_count(per_second(bwd_factor * flops, bwd), "FLOPS"));
  out += line("fwd+bwd FLOPS per rank = " + total_factor + " * fwd flops per rank / (fwd+bwd latency):",
              format_count(per_second((bwd_factor + 1) * flops, fwd + bwd), "FLOPS"));
  out += line("step latency:", format_seconds(opt));
  out += line("iter latency:", format_seconds(iter));
  out += line("FLOPS per rank = " + total_factor + " * fwd flops per rank / iter latency:",
              format_count(per_second((bwd_factor + 1) * flops, iter), "FLOPS"));
  out += line("samples/second:", fixed("%.2f", per_second(static_cast<double>(job_.micro_batch_size * job_.data_parallel_size), iter)));
  out += "\n----------------------------- Aggregated profile per rank -----------------------------\n";
  out += aggregated_profile();
  if (options_.detailed) {
    out += "\n------------------------------ Detailed profile per rank ------------------------------\n";
    out += "Each module: params, share of params, MACs, share of MACs, fwd latency, share of fwd latency, fwd FLOPS.\n";
    out += "A parent's MACs and latency exceed its children's sum by the ops it runs itself (GPT's embedding sum, "
           "say);\nflops are counted from shapes (docs/monitoring.md), so FLOPS may exceed what the hardware reaches, "
           "and the\ntop module's latency, taken around its forward, is below the fwd latency above.\n\n";
    detailed_profile(0, "", out);
  }
  out += "------------------------------------------------------------------------------\n";
  return out;
}

std::string FlopsProfiler::aggregated_profile() const {
  // Per depth, per module type: MACs, params and forward latency summed over its modules.
  struct Sums {
    double macs = 0, params = 0, ms = 0;
  };
  std::map<int, std::map<std::string, Sums>> by_depth;
  for (size_t m = 0; m < modules_.size(); ++m) {
    Sums& s = by_depth[modules_[m].depth][modules_[m].type];
    s.macs += static_cast<double>(total_macs(m));
    s.params += static_cast<double>(total_params(m));
    s.ms += forward_ms(m);
  }
  const int deepest = by_depth.empty() ? 0 : by_depth.rbegin()->first;
  const int last = options_.module_depth < 0 ? deepest : std::min<int>(deepest, static_cast<int>(options_.module_depth));
  std::string out = "Top " + std::to_string(options_.top_modules) +
                    " modules in terms of params, MACs or fwd latency at each depth:\n";
  for (int d = 0; d <= last; ++d) {
    std::vector<std::pair<std::string, Sums>> rows(by_depth[d].begin(), by_depth[d].end());
    const size_t k = std::min<size_t>(static_cast<size_t>(options_.top_modules), rows.size());
    const auto top = [&](double Sums::*field, const std::function<std::string(double)>& text) {
      std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) { return a.second.*field > b.second.*field; });
      std::string list;
      for (size_t i = 0; i < k; ++i) list += (i ? ", " : "") + rows[i].first + ": " + text(rows[i].second.*field);
      return "{" + list + "}";
    };
    out += "depth " + std::to_string(d) + ":\n";
    out += "    params      - " + top(&Sums::params, [](double v) { return format_count(v); }) + "\n";
    out += "    MACs        - " + top(&Sums::macs, [](double v) { return format_count(v, "MACs"); }) + "\n";
    out += "    fwd latency - " + top(&Sums::ms, [](double v) { return format_seconds(v / 1e3); }) + "\n";
  }
  return out;
}

void FlopsProfiler::detailed_profile(size_t m, const std::string& indent, std::string& out) const {
  const ModuleProfile& module = modules_[m];
  const double params = static_cast<double>(total_params(m)), macs = static_cast<double>(total_macs(m));
  const double ms = forward_ms(m);
  const std::string stats =
      format_count(params) + " = " + fixed("%.2f", percent(params, static_cast<double>(total_params()))) + "% Params, " +
      format_count(macs, "MACs") + " = " + fixed("%.2f", percent(macs, static_cast<double>(total_macs()))) + "% MACs, " +
      format_seconds(ms / 1e3) + " = " + fixed("%.2f", percent(ms, forward_ms())) + "% latency, " +
      format_count(ms > 0 ? static_cast<double>(total_flops(m)) / (ms / 1e3) : 0.0, "FLOPS");
  const std::string head = indent + (module.name.empty() ? "" : "(" + module.name + "): ") + module.type + "(";
  if (module.children.empty()) return void(out += head + stats + ")\n");
  out += head + "\n" + indent + "  " + stats + "\n";
  for (size_t child : module.children) detailed_profile(child, indent + "  ", out);
  out += indent + ")\n";
}

void FlopsProfiler::before_forward(Engine&, int64_t step) {
  if (step == options_.profile_step + 1) start();  // each micro-batch restarts: the last one counts
}

void FlopsProfiler::after_forward(Engine&, int64_t step) {
  if (step == options_.profile_step + 1) stop();
}

void FlopsProfiler::after_optimizer_step(Engine&, const StepReport& report) {
  if (report.step != options_.profile_step + 1) return;
  const PhaseTimes last = report.micro_step_times.empty() ? report.times : report.micro_step_times.back();
  const std::string text = this->report(report.step, last);
  if (options_.output_file.empty()) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  std::ofstream file(options_.output_file);
  FATHOM_CHECK(file << text, "flops_profiler: cannot write output_file ", options_.output_file,
               "; check that its folder exists and is writable");
}

}  // namespace fathom
