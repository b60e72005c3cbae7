// The multi-tensor optimizer steps against the single-tensor ones on the CPU (and scale_multi
// against an element-by-element product): the same list of
// tensors (odd sizes, an empty one, misaligned views, every kind of parameter copy) updated
// either way must come out bit for bit the same, and a bad entry must stop the whole step
// before anything is written.
#include <cmath>
#include <cstring>

#include "tests/kernels/step_lists.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::testing;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(kCPU).contiguous(), y = b.to(kCPU).contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

}  // namespace

TEST_CASE("adam_step_multi equals adam_step on each tensor, bit for bit", "[kernels]") {
  for (bool adam_w : {true, false}) {
    INFO((adam_w ? "adamw" : "adam + L2"));
    Generator gen(11);
    const std::vector<AdamTensors> multi = adam_list(gen);
    const std::vector<AdamTensors> single = copy_list(multi, kCPU);
    for (int64_t step : {1, 2, 3}) {
      const AdamHyper h = adam_hyper_for_test(adam_w, step);
      adam_step_multi(multi, h);
      for (const AdamTensors& t : single) adam_step(t.params, t.grads, t.exp_avg, t.exp_avg_sq, h, t.param_copy);
    }
    for (size_t k = 0; k < multi.size(); ++k) {
      INFO("tensor " << k);
      CHECK(same_bits(multi[k].params, single[k].params));
      CHECK(same_bits(multi[k].exp_avg, single[k].exp_avg));
      CHECK(same_bits(multi[k].exp_avg_sq, single[k].exp_avg_sq));
      CHECK(same_bits(multi[k].param_copy, single[k].param_copy));
      if (multi[k].param_copy.defined())  // written, and the rounded params
        CHECK(same_bits(multi[k].param_copy, multi[k].params.to(multi[k].param_copy.dtype())));
    }
  }
}

TEST_CASE("sgd_step_multi equals sgd_step on each tensor, bit for bit", "[kernels]") {
  struct Mode {
    double momentum;
    bool nesterov;
  };
  for (const Mode mode : {Mode{0.0, false}, Mode{0.9, false}, Mode{0.9, true}}) {
    INFO("momentum " << mode.momentum << (mode.nesterov ? ", nesterov" : ""));
    Generator gen(12);
    const std::vector<SgdTensors> multi = sgd_list(gen);
    const std::vector<SgdTensors> single = copy_list(multi, kCPU);
    for (bool first : {true, false, false}) {
      const SgdHyper h = sgd_hyper_for_test(mode.momentum, mode.nesterov, first);
      sgd_step_multi(multi, h);
      for (const SgdTensors& t : single) sgd_step(t.params, t.grads, t.momentum_buffer, h, t.param_copy);
    }
    for (size_t k = 0; k < multi.size(); ++k) {
      INFO("tensor " << k);
      CHECK(same_bits(multi[k].params, single[k].params));
      CHECK(same_bits(multi[k].momentum_buffer, single[k].momentum_buffer));
      CHECK(same_bits(multi[k].param_copy, single[k].param_copy));
    }
  }
}

TEST_CASE("scale_multi scales every tensor in f32 and writes the rounded copies", "[kernels]") {
  Generator gen(14);
  const std::vector<ScaleTensors> list = scale_list(gen);
  const std::vector<ScaleTensors> before = copy_list(list, kCPU);
  const double factor = 0.7310585786300049;  // not a power of two: the product rounds
  scale_multi(list, factor);
  for (size_t k = 0; k < list.size(); ++k) {
    INFO("tensor " << k);
    CHECK(same_bits(list[k].values.contiguous(), scaled_reference(before[k].values, factor)));
    if (list[k].copy.defined()) CHECK(same_bits(list[k].copy, list[k].values.to(list[k].copy.dtype())));
  }
  std::vector<ScaleTensors> bad = copy_list(list, kCPU);
  bad[2].values = bad[2].values.to(DType::BF16);
  CHECK(error_of([&] { scale_multi(bad, 2.0); }) ==
        "scale_multi (tensor 2): values must be f32 (fp32 master state), got bf16");
  CHECK(same_bits(bad[0].values, list[0].values));  // checked before anything was written
}

// The fused kernels round the 16-bit copy with their own vectorisable code: it must equal the
// conversion everywhere else (nearest even, NaN quietened with its sign and payload kept).
TEST_CASE("the fused kernels' bf16 and f16 copies round exactly as the tensor conversion does", "[kernels]") {
  const float nan_payload = [] {
    const uint32_t bits = 0xffa12345u;  // a negative signalling NaN with a payload
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }();
  const std::vector<float> edge = {0.0f, -0.0f, 1.0f, 1.00390625f, 1.01171875f, 1.0078125f, 3.0e38f, -3.4e38f,
                                   1e-40f, -1e-45f, INFINITY, -INFINITY, NAN, nan_payload, 65504.f, 65520.f};
  std::vector<float> values = edge;
  Generator gen(3);
  const Tensor random = Tensor::empty({1000});
  fill_normal(random, gen, 0.0, 1e3);
  for (float v : random.to_vector<float>()) values.push_back(v);
  for (DType copy_dtype : {DType::BF16, DType::F16}) {
    INFO(dtype_name(copy_dtype));
    const Tensor v = Tensor::from_vector(values), copy = Tensor::empty({static_cast<int64_t>(values.size())}, copy_dtype);
    scale_multi({{v, copy}}, 1.0);
    CHECK(same_bits(copy, v.to(copy_dtype)));
  }
}

TEST_CASE("multi-tensor steps check every entry before updating any", "[kernels]") {
  Generator gen(13);
  std::vector<AdamTensors> list = adam_list(gen);
  const std::vector<AdamTensors> before = copy_list(list, kCPU);
  list.back().grads = Tensor::zeros({list.back().params.numel() + 1});
  const size_t last = list.size() - 1;
  CHECK(error_of([&] { adam_step_multi(list, adam_hyper_for_test(true, 1)); }) ==
        "adam_step_multi (tensor " + std::to_string(last) + "): grads has " +
            std::to_string(list.back().params.numel() + 1) + " elements but params has " +
            std::to_string(list.back().params.numel()) + " (shapes [" +
            std::to_string(list.back().params.numel() + 1) + "] and [" + std::to_string(list.back().params.numel()) +
            "])");
  for (size_t k = 0; k < last; ++k) CHECK(same_bits(list[k].params, before[k].params));

  AdamHyper bad = adam_hyper_for_test(true, 0);
  CHECK(error_of([&] { adam_step_multi(before, bad); }) == "adam_step_multi: step counts from 1, got 0");

  std::vector<SgdTensors> sgd = sgd_list(gen);
  sgd[1].momentum_buffer = Tensor();
  CHECK(error_of([&] { sgd_step_multi(sgd, sgd_hyper_for_test(0.9, false, false)); }) ==
        "sgd_step_multi (tensor 1): momentum_buffer is undefined");
  sgd_step_multi(sgd, sgd_hyper_for_test(0.0, false, false));  // without momentum the buffer is not needed
  CHECK_NOTHROW(adam_step_multi({}, adam_hyper_for_test(true, 1)));
}
