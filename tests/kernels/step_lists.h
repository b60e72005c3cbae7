#pragma once
// Parameter lists for the multi-tensor optimizer tests (CPU and CUDA): odd sizes, an empty
// tensor, views that start off 16-byte alignment, and 16-bit/f32/no parameter copies, so every
// path of the fused steps (vectorised, element by element, tails) is exercised. Copies start
// out as NaN, so an element a kernel forgets to write shows.
#include <cmath>
#include <vector>

#include "core/generator.h"
#include "kernels/optimizer_kernels.h"

namespace fathom::testing {

struct StepCase {
  int64_t n;
  int64_t offset;  // elements into a larger buffer: 1 puts the view off 16-byte alignment
  DType copy;      // Bool: no parameter copy
};

inline std::vector<StepCase> step_cases() {
  return {{1, 0, DType::Bool},       {0, 0, DType::BF16},     {4099, 0, DType::BF16}, {16384 * 3 + 7, 0, DType::F16},
          {1001, 1, DType::BF16},    {768, 0, DType::F32},    {65536, 2, DType::Bool}, {33, 3, DType::F16},
          {100003, 0, DType::Bool}};
}

// A flat f32 view of n elements at `offset` into a fresh buffer, filled uniformly in [low, high).
inline Tensor step_buffer(const StepCase& c, Generator& gen, double low, double high) {
  return uniform({c.n + c.offset}, gen, low, high).narrow(0, c.offset, c.n);
}

inline Tensor step_copy(const StepCase& c) {
  if (c.copy == DType::Bool) return Tensor();
  return Tensor::full({c.n + c.offset}, std::nan(""), c.copy).narrow(0, c.offset, c.n);
}

// The same tensors (fresh storage) on `device`, with the same offsets.
inline Tensor same_on(const Tensor& t, Device device) {
  if (!t.defined()) return t;
  const int64_t offset = t.offset();
  Tensor buffer = Tensor::full({t.numel() + offset}, std::nan(""), t.dtype(), device);
  Tensor view = buffer.narrow(0, offset, t.numel());
  view.copy_(t);
  return view;
}

inline std::vector<AdamTensors> adam_list(Generator& gen) {
  std::vector<AdamTensors> list;
  for (const StepCase& c : step_cases())
    list.push_back({step_buffer(c, gen, -1, 1), step_buffer(c, gen, -1, 1), step_buffer(c, gen, -0.1, 0.1),
                    step_buffer(c, gen, 0, 0.01), step_copy(c)});
  return list;
}

inline std::vector<SgdTensors> sgd_list(Generator& gen) {
  std::vector<SgdTensors> list;
  for (const StepCase& c : step_cases())
    list.push_back({step_buffer(c, gen, -1, 1), step_buffer(c, gen, -1, 1), step_buffer(c, gen, -1, 1), step_copy(c)});
  return list;
}

inline std::vector<AdamTensors> copy_list(const std::vector<AdamTensors>& list, Device device) {
  std::vector<AdamTensors> out;
  for (const AdamTensors& t : list)
    out.push_back({same_on(t.params, device), same_on(t.grads, device), same_on(t.exp_avg, device),
                   same_on(t.exp_avg_sq, device), same_on(t.param_copy, device)});
  return out;
}

inline std::vector<SgdTensors> copy_list(const std::vector<SgdTensors>& list, Device device) {
  std::vector<SgdTensors> out;
  for (const SgdTensors& t : list)
    out.push_back({same_on(t.params, device), same_on(t.grads, device), same_on(t.momentum_buffer, device),
                   same_on(t.param_copy, device)});
  return out;
}

inline std::vector<ScaleTensors> scale_list(Generator& gen) {
  std::vector<ScaleTensors> list;
  for (const StepCase& c : step_cases()) list.push_back({step_buffer(c, gen, -3, 3), step_copy(c)});
  return list;
}

inline std::vector<ScaleTensors> copy_list(const std::vector<ScaleTensors>& list, Device device) {
  std::vector<ScaleTensors> out;
  for (const ScaleTensors& t : list) out.push_back({same_on(t.values, device), same_on(t.copy, device)});
  return out;
}

// values * factor in f32, element by element: what scale_multi must produce.
inline Tensor scaled_reference(const Tensor& values, double factor) {
  std::vector<float> v = values.to(kCPU).to_vector<float>();
  for (float& x : v) x *= static_cast<float>(factor);
  return Tensor::from_vector(v).reshape(values.sizes());
}

inline AdamHyper adam_hyper_for_test(bool adam_w, int64_t step) {
  AdamHyper h;
  h.lr = 1e-2;
  h.beta1 = 0.9;
  h.beta2 = 0.95;
  h.eps = 1e-8;
  h.weight_decay = 0.1;
  h.step = step;
  h.adam_w_mode = adam_w;
  return h;
}

inline SgdHyper sgd_hyper_for_test(double momentum, bool nesterov, bool first_step) {
  SgdHyper h;
  h.lr = 0.05;
  h.momentum = momentum;
  h.weight_decay = 1e-2;
  h.nesterov = nesterov;
  h.first_step = first_step;
  return h;
}

}  // namespace fathom::testing
