#include "nn/deferred_init.h"

#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "core/memory_stats.h"
#include "core/storage.h"
#include "nn/module.h"

namespace fathom::nn {
namespace {

thread_local int scopes = 0;

// The recorded fills, keyed by the parameter's identity; an entry whose parameter is gone is
// never matched (the weak pointer says so) and is dropped when the table is next swept.
struct Deferred {
  std::weak_ptr<autograd::VariableImpl> owner;
  InitialValue fill;
};
std::mutex table_mutex;
std::unordered_map<const void*, Deferred> table;

void sweep() {
  for (auto it = table.begin(); it != table.end();) it = it->second.owner.expired() ? table.erase(it) : std::next(it);
}

}  // namespace

DeferredInit::DeferredInit() { ++scopes; }
DeferredInit::~DeferredInit() { --scopes; }
bool DeferredInit::active() { return scopes > 0; }

void release_if_deferred(Module& child) {
  if (!DeferredInit::active()) return;
  for (const autograd::Variable& parameter : child.parameters()) parameter.data().storage()->release();
}

bool is_deferred(const autograd::Variable& parameter) {
  const Tensor& data = parameter.data();
  return data.defined() && data.storage() != nullptr && data.storage()->is_released();
}

Tensor deferred_like(const Tensor& like, DType dtype, Device device) {
  MemoryTagScope tag(like.storage()->tag());
  Tensor out = Tensor::empty(like.sizes(), dtype, device);  // one parameter's worth, freed at once
  out.storage()->release();
  return out;
}

void defer_initial_value(const autograd::Variable& parameter, InitialValue fill) {
  std::lock_guard<std::mutex> lock(table_mutex);
  if (table.size() > 4096) sweep();
  table[parameter.impl().get()] = {parameter.impl(), std::move(fill)};
}

Tensor initial_value(const autograd::Variable& parameter, const std::string& name) {
  InitialValue fill;
  {
    std::lock_guard<std::mutex> lock(table_mutex);
    const auto it = table.find(parameter.impl().get());
    if (it != table.end() && it->second.owner.lock() == parameter.impl()) fill = it->second.fill;
  }
  FATHOM_CHECK(fill != nullptr, "parameter \"", name, "\" was built under nn::DeferredInit, but its model recorded no "
               "way to regenerate its starting values (nn::defer_initial_value); build this model without "
               "DeferredInit, or give it a deferred initialisation as models::Decoder has");
  MemoryTagScope tag(MemoryTag::Parameters);
  Tensor out = Tensor::empty(parameter.sizes(), DType::F32);
  fill(out);
  return out;
}

}  // namespace fathom::nn
