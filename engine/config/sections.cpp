// The "fp16", "bf16", "tensorboard", "csv_monitor", "optimizer" and "scheduler" sections.
#include <algorithm>
#include <cctype>

#include "autograd/variable.h"
#include "core/error.h"
#include "core/tensor.h"
#include "engine/config/parse.h"
#include "parallel/compressed_optimizers.h"
#include "parallel/local_communicator.h"
#include "core/did_you_mean.h"

namespace fathom {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// The nn factories' own messages ("AdamW: unknown optimizer parameter \"lrr\" ...") are kept
// whole; the config adds where in the file: the parameter the message quotes, else "params".
template <typename Build>
void check_with_factory(const ConfigSection& section, const ConfigSection& params, Build build) {
  try {
    build();
  } catch (const Error& e) {
    if (params.present())
      for (const ConfigMember& member : params.node()->members)
        if (e.message().find("\"" + member.key + "\"") != std::string::npos) params.fail(member.key, e.message());
    section.fail("params", e.message());
  }
}

}  // namespace

const std::vector<Field<Fp16Config>> kFp16Fields = {
    {"enabled", &Fp16Config::enabled},
    {"auto_cast", &Fp16Config::auto_cast},
    {"loss_scale", &Fp16Config::loss_scale, {0}},
    {"initial_scale_power", &Fp16Config::initial_scale_power, {0, 127}},  // 2^127: a float's largest power of 2
    {"loss_scale_window", &Fp16Config::loss_scale_window, {1}},
    {"hysteresis", &Fp16Config::hysteresis, {1}},
    {"consecutive_hysteresis", &Fp16Config::consecutive_hysteresis},
    {"min_loss_scale", &Fp16Config::min_loss_scale, {0}},
    {"fp16_master_weights_and_grads", &Fp16Config::fp16_master_weights_and_grads}};

Fp16Config parse_fp16(const ConfigSection& s) {
  const Fp16Config c = read_section(s, kFp16Fields);
  if (s.find("min_loss_scale") && c.min_loss_scale == 0)
    s.fail("min_loss_scale", "expected a number > 0, got 0 (a zero scale would zero every gradient)");
  if (c.fp16_master_weights_and_grads)
    s.fail("fp16_master_weights_and_grads",
           "true is not supported (Fathom does not implement DeepSpeed's fp16 master weights and gradients: its "
           "master weights are always fp32); use false");
  return c;
}

const std::vector<Field<Bf16Config>> kBf16Fields = {{"enabled", &Bf16Config::enabled},
                                                      {"immediate_grad_update", &Bf16Config::immediate_grad_update}};

Bf16Config parse_bf16(const ConfigSection& s) {
  const Bf16Config c = read_section(s, kBf16Fields);
  if (c.immediate_grad_update)
    s.fail("immediate_grad_update",
           "true is not supported (Fathom does not implement DeepSpeed's bf16 immediate gradient update); use false");
  return c;
}

const std::vector<Field<MonitorConfig>> kMonitorFields = {{"enabled", &MonitorConfig::enabled},
                                                         {"output_path", &MonitorConfig::output_path},
                                                         {"job_name", &MonitorConfig::job_name}};

MonitorConfig parse_monitor(const ConfigSection& s) {
  const MonitorConfig c = read_section(s, kMonitorFields);
  if (c.job_name.empty()) s.fail("job_name", "is empty; the files go to output_path/job_name, so name the job");
  return c;
}

OptimizerConfig parse_optimizer(const ConfigSection& s) {
  OptimizerConfig c;
  if (!s.present()) return c;
  s.check_keys({"type", "params", "legacy_fusion"});
  if (s.boolean("legacy_fusion", false))
    s.fail("legacy_fusion", "true is not supported (DeepSpeed's legacy fused fp16 optimizer); remove the key");
  const std::vector<std::string> types = {"Adam", "AdamW", "SGD", "Lamb", "Lion", "OneBitAdam", "ZeroOneAdam",
                                            "OneBitLamb"};
  c.type = s.string("type", "");
  if (c.type.empty())
    throw_config_error({s.source(), s.node()->line, s.path()},
                       "\"type\" is missing; name the optimizer, e.g. \"type\": \"AdamW\" (Fathom implements " +
                           joined(types) + ")");
  const bool known = std::any_of(types.begin(), types.end(), [&](const std::string& t) { return lower(t) == lower(c.type); });
  if (!known) {
    // DeepSpeed's own optimizers, and any torch.optim class it would look up by name.
    const std::vector<std::string> deepspeed = {"Adagrad", "MuAdam", "MuAdamW", "MuSGD"};
    const bool theirs = std::any_of(deepspeed.begin(), deepspeed.end(),
                                    [&](const std::string& t) { return lower(t) == lower(c.type); });
    const std::string match = closest_match(c.type, types);
    s.fail("type", "\"" + c.type + "\" is not supported (" +
                       (theirs ? "Fathom does not implement DeepSpeed's " + c.type : std::string("not an optimizer Fathom implements")) +
                       ")" + (match.empty() || theirs ? "" : "; did you mean \"" + match + "\"?") + "; use one of " +
                       joined(types));
  }
  const ConfigSection params = s.section("params");
  if (params.present()) {
    for (const ConfigMember& member : params.node()->members) {
      const ConfigNode& value = member.value;
      const ConfigLocation where = params.where(member.key);
      const std::string expected = "a number, true or false, or a list of numbers";
      if (member.key == "comm_backend_name" && value.is_scalar() && value.quoted) {
        c.params.emplace(member.key, nn::OptimizerValue(value.text));  // 1-bit Adam's one string parameter
      } else if (const auto flag = config_bool(value)) {
        c.params.emplace(member.key, nn::OptimizerValue(*flag));
      } else if (const auto number = config_number(value)) {
        c.params.emplace(member.key, nn::OptimizerValue(*number));
      } else if (value.is_sequence()) {
        std::vector<double> numbers;
        for (size_t i = 0; i < value.items.size(); ++i) {
          const auto item = config_number(value.items[i]);
          if (!item)
            throw_config_type_error({where.source, value.items[i].line, where.path + "[" + std::to_string(i) + "]"},
                                    value.items[i], "a number");
          numbers.push_back(*item);
        }
        c.params.emplace(member.key, nn::OptimizerValue(std::move(numbers)));
      } else {
        throw_config_type_error(where, value, expected);
      }
    }
  }
  // Builds the optimizer once over a one-element parameter, so unknown parameter names and
  // out-of-range values are reported here, with the file and line, not at the first step.
  check_with_factory(s, params, [&] {
    const std::vector<autograd::Variable> one{autograd::Variable(Tensor::zeros({1}), true)};
    if (parallel::is_compressed_optimizer(c.type))
      parallel::make_compressed_optimizer(c.type, c.params, nn::single_group(one),
                                          std::make_shared<parallel::LocalCommunicator>());
    else
      nn::make_optimizer(c.type, c.params, one);
  });
  return c;
}

SchedulerConfig parse_scheduler(const ConfigSection& s, double base_lr) {
  SchedulerConfig c;
  if (!s.present()) return c;
  s.check_keys({"type", "params"});
  const std::vector<std::string>& types = nn::lr_scheduler_types();
  c.type = s.string("type", "");
  if (c.type.empty())
    throw_config_error({s.source(), s.node()->line, s.path()},
                       "\"type\" is missing; name the schedule, e.g. \"type\": \"WarmupLR\" (Fathom implements " +
                           joined(types) + ")");
  if (std::find(types.begin(), types.end(), c.type) == types.end()) {
    const std::string match = closest_match(c.type, types);
    const std::string why = c.type == "LRRangeTest" ? "Fathom does not implement DeepSpeed's LRRangeTest"
                                                    : "not a schedule Fathom implements; names are case-sensitive, as in DeepSpeed";
    s.fail("type", "\"" + c.type + "\" is not supported (" + why + ")" +
                       (match.empty() || match == c.type ? "" : "; did you mean \"" + match + "\"?") + "; use one of " +
                       joined(types));
  }
  const ConfigSection params = s.section("params");
  if (params.present()) {
    for (const ConfigMember& member : params.node()->members) {
      const ConfigNode& value = member.value;
      const ConfigLocation where = params.where(member.key);
      if (value.is_null()) continue;  // null = the schedule's default
      if (!value.is_scalar() || value.text == "auto") throw_config_type_error(where, value, "a number, true or false, or a string");
      if (const auto flag = config_bool(value)) {
        c.params.emplace(member.key, nn::LRParamValue(*flag));
      } else if (const auto number = config_number(value)) {
        const bool integral = value.text.find_first_of(".eE") == std::string::npos;
        if (integral) c.params.emplace(member.key, nn::LRParamValue(static_cast<int64_t>(*number)));
        else c.params.emplace(member.key, nn::LRParamValue(*number));
      } else {
        // A quoted number is a mistake, not a string: no schedule takes numeric strings.
        ConfigNode plain = value;
        plain.quoted = false;
        if (config_number(plain) || config_bool(plain)) throw_config_type_error(where, value, "a number");
        c.params.emplace(member.key, nn::LRParamValue(value.text));
      }
    }
  }
  check_with_factory(s, params, [&] { nn::make_lr_scheduler(c.type, c.params, base_lr); });
  return c;
}

}  // namespace fathom
