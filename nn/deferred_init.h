#pragma once
// Building a model too large for memory, shard by shard (DeepSpeed's zero.Init).
//
// While a DeferredInit scope is alive on this thread, each module's parameters are released —
// shapes and dtypes kept, memory freed — as soon as the module is registered into its parent, so
// construction holds one module's parameters at a time. A model that can regenerate any
// parameter's starting values on its own (models::Decoder: each weight draws from its own stream of
// the seed) records how, per parameter, with defer_initial_value instead of filling them. ZeRO
// stage 3 then asks initial_value for one parameter at a time and keeps only this rank's part
// (zero/flat_parameters.h), so no rank ever holds the whole model; every rank regenerates the
// same values, so nothing is broadcast.
//
//   std::shared_ptr<models::Decoder> model;
//   { nn::DeferredInit deferred; model = std::make_shared<models::Decoder>(config, seed); }
//   Initialized init = initialize(config_with_stage_3, model, ...);

#include <functional>
#include <string>

#include "autograd/variable.h"

namespace fathom::nn {

class Module;

class DeferredInit {
 public:
  DeferredInit();
  ~DeferredInit();
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;
  static bool active();  // on this thread
};

// Module::add_child calls it: the child's parameters are released when a scope is active.
void release_if_deferred(Module& child);

// Whether the parameter's memory was released by DeferredInit (its values are deferred).
bool is_deferred(const autograd::Variable& parameter);
// A released tensor shaped like `like`, in `dtype` on `device` (Module::to on deferred parameters).
Tensor deferred_like(const Tensor& like, DType dtype, Device device);

// How a deferred parameter gets its values: fills `out` (its shape, f32).
using InitialValue = std::function<void(const Tensor& out)>;
void defer_initial_value(const autograd::Variable& parameter, InitialValue fill);
// A new f32 tensor of the parameter's starting values; an error naming `name` when its model
// recorded none (only models that can regenerate their initialisation can be deferred).
Tensor initial_value(const autograd::Variable& parameter, const std::string& name);

}  // namespace fathom::nn
