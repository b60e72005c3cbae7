// Optimizers against hand-computed steps on a 3-element parameter, state_dict round trips and
// errors, the factory's errors, gradient clipping and memory tagging.
//
// Every case starts from p0 = [1, -2, 0.5] with gradients g1 = [0.1, -0.2, 0.3] and
// g2 = [-0.1, 0.4, 0.2] (g3 = [0.2, 0.1, -0.3] where a third step is taken). Expected values
// are exact-arithmetic results; the optimizers compute in f32, hence the tolerances.
#include <cmath>
#include <cstring>
#include <limits>

#include "autograd/variable.h"
#include "core/allocator.h"
#include "nn/adam.h"
#include "nn/grad_clipping.h"
#include "nn/lamb.h"
#include "nn/lion.h"
#include "nn/optimizer_factory.h"
#include "nn/sgd.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::nn;
using autograd::Variable;

namespace {

constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;

const std::vector<float> kP0 = {1.0f, -2.0f, 0.5f};
const std::vector<float> kG1 = {0.1f, -0.2f, 0.3f};
const std::vector<float> kG2 = {-0.1f, 0.4f, 0.2f};
const std::vector<float> kG3 = {0.2f, 0.1f, -0.3f};

Variable param(const std::vector<float>& values, const std::string& name = "w") {
  return Variable(Tensor::from_vector(values), true, name);
}

void set_grad(const Variable& p, const std::vector<float>& values) { p.set_grad(Tensor::from_vector(values)); }

std::vector<double> values(const Variable& p) { return p.data().to_vector<double>(); }

// Takes one step per gradient list.
void run(Optimizer& optimizer, const Variable& p, const std::vector<std::vector<float>>& grads) {
  for (const auto& g : grads) {
    set_grad(p, g);
    optimizer.step();
  }
}

#define CHECK_VALUES(actual, ...) \
  CHECK(::fathom::testing::mismatch((actual), std::vector<double> __VA_ARGS__, kAtol, kRtol) == "")

int64_t optimizer_state_bytes() { return memory_snapshot()[MemoryTag::OptimizerState].current; }

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

// ----------------------------------------------------------------------------------------- SGD

TEST_CASE("SGD: momentum and weight decay, three steps", "[nn]") {
  // lr 0.1, momentum 0.9, weight_decay 0.01. d = g + 0.01 p; buf = d (step 1), else 0.9 buf + d; p -= 0.1 buf.
  // step 1: d = [0.11, -0.22, 0.305];              p = [0.989, -1.978, 0.4695]
  // step 2: d = [-0.09011, 0.38022, 0.204695]
  //         buf = 0.9 [0.11, -0.22, 0.305] + d = [0.00889, 0.18222, 0.479195];  p = [0.988111, -1.996222, 0.4215805]
  // step 3: buf = [0.21788211, 0.24403578, 0.135491305];  p = [0.966322789, -2.02062558, 0.40803137]
  Variable p = param(kP0);
  Sgd sgd({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  run(sgd, p, {kG1});
  CHECK_VALUES(values(p), {0.989, -1.978, 0.4695});
  run(sgd, p, {kG2});
  CHECK_VALUES(values(p), {0.988111, -1.996222, 0.4215805});
  CHECK_VALUES(sgd.state(p, "momentum_buffer").to_vector<double>(), {0.00889, 0.18222, 0.479195});
  run(sgd, p, {kG3});
  CHECK_VALUES(values(p), {0.966322789, -2.02062558, 0.40803137});
  CHECK(sgd.step_count(p) == 3);
}

TEST_CASE("SGD: nesterov, dampening and plain steps", "[nn]") {
  SECTION("nesterov") {
    // lr 0.1, momentum 0.9: step 1 buf = g1, d = g1 + 0.9 g1 = 1.9 g1 -> p = p0 - 0.19 g1 = [0.981, -1.962, 0.443]
    // step 2: buf = 0.9 g1 + g2 = [-0.01, 0.22, 0.47]; d = g2 + 0.9 buf = [-0.109, 0.598, 0.623]
    //         p = [0.981 + 0.0109, -1.962 - 0.0598, 0.443 - 0.0623] = [0.9919, -2.0218, 0.3807]
    Variable p = param(kP0);
    Sgd sgd({p}, {.lr = 0.1, .momentum = 0.9, .nesterov = true});
    run(sgd, p, {kG1});
    CHECK_VALUES(values(p), {0.981, -1.962, 0.443});
    run(sgd, p, {kG2});
    CHECK_VALUES(values(p), {0.9919, -2.0218, 0.3807});
  }
  SECTION("dampening applies from the second step (torch)") {
    // momentum 0.9, dampening 0.5: buf1 = g1 (no dampening); p = [0.99, -1.98, 0.47]
    // buf2 = 0.9 g1 + 0.5 g2 = [0.04, 0.02, 0.37]; p = [0.986, -1.982, 0.433]
    Variable p = param(kP0);
    Sgd sgd({p}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
    run(sgd, p, {kG1, kG2});
    CHECK_VALUES(values(p), {0.986, -1.982, 0.433});
  }
  SECTION("no momentum keeps no state") {
    // p = p0 - 0.5 g1 = [0.95, -1.9, 0.35]
    Variable p = param(kP0);
    Sgd sgd({p}, {.lr = 0.5});
    const int64_t before = optimizer_state_bytes();
    run(sgd, p, {kG1});
    CHECK_VALUES(values(p), {0.95, -1.9, 0.35});
    CHECK(sgd.state_dict().tensors.empty());
    CHECK(optimizer_state_bytes() == before);
  }
}

// ---------------------------------------------------------------------------------- Adam/AdamW

TEST_CASE("AdamW (adam_w_mode on): decoupled weight decay, three steps", "[nn]") {
  // lr 0.1, betas (0.9, 0.999), eps 1e-8, weight_decay 0.1.
  // step 1: m = 0.1 g1, v = 0.001 g1^2; m/bc1 = g1, v/bc2 = g1^2, so the Adam part is g/(|g| + 1e-8) ~ sign(g1):
  //         p = p0 - 0.1 (sign(g1) + 0.1 p0) = [1 - 0.1 - 0.01, -2 + 0.1 + 0.02, 0.5 - 0.1 - 0.005]
  //           = [0.89, -1.88, 0.395]
  // step 2: m = 0.9 m + 0.1 g2 = [-0.001, 0.022, 0.047], v = 0.999 v + 0.001 g2^2 = [1.999e-5, 1.9996e-4, 1.2991e-4]
  //         bc1 = 0.19, bc2 = 0.001999; update = (m/0.19)/(sqrt(v/0.001999) + 1e-8) + 0.1 p
  //         p = [0.886363167, -1.89781036, 0.294014794]
  // step 3: p = [0.827675325, -1.92039737, 0.27431422]
  Variable p = param(kP0);
  Adam adam({p}, {.lr = 0.1, .weight_decay = 0.1});
  CHECK(adam.options().adam_w_mode);  // DeepSpeed's default
  run(adam, p, {kG1});
  CHECK_VALUES(values(p), {0.89, -1.88, 0.395});
  run(adam, p, {kG2});
  CHECK_VALUES(values(p), {0.886363167, -1.89781036, 0.294014794});
  CHECK_VALUES(adam.state(p, "exp_avg").to_vector<double>(), {-0.001, 0.022, 0.047});
  CHECK_VALUES(adam.state(p, "exp_avg_sq").to_vector<double>(), {1.999e-05, 0.00019996, 0.00012991});
  run(adam, p, {kG3});
  CHECK_VALUES(values(p), {0.827675325, -1.92039737, 0.27431422});

  // AdamW ignores adam_w_mode = false, as DeepSpeed's "AdamW" does.
  Variable q = param(kP0, "q");
  AdamW adamw({q}, {.lr = 0.1, .weight_decay = 0.1, .adam_w_mode = false});
  CHECK(adamw.type() == "AdamW");
  run(adamw, q, {kG1});
  CHECK_VALUES(values(q), {0.89, -1.88, 0.395});
}

TEST_CASE("Adam (adam_w_mode off): L2 weight decay joins the gradient", "[nn]") {
  // lr 0.1, weight_decay 0.1: g' = g + 0.1 p.
  // step 1: g' = [0.2, -0.4, 0.35]; the first Adam step is sign(g') -> p = p0 - 0.1 sign(g') = [0.9, -1.9, 0.4]
  // step 2: g' = g2 + 0.1 p1 = [-0.01, 0.21, 0.24]; m = [0.017, -0.015, 0.0555], v = [4.006e-5, 2.0394e-4, 1.799775e-4]
  //         p = p1 - 0.1 (m/0.19)/(sqrt(v/0.001999) + 1e-8) = [0.836795765, -1.87528317, 0.302649846]
  Variable p = param(kP0);
  Adam adam({p}, {.lr = 0.1, .weight_decay = 0.1, .adam_w_mode = false});
  run(adam, p, {kG1});
  CHECK_VALUES(values(p), {0.9, -1.9, 0.4});
  run(adam, p, {kG2});
  CHECK_VALUES(values(p), {0.836795765, -1.87528317, 0.302649846});
}

TEST_CASE("Adam: bias_correction off", "[nn]") {
  // lr 0.1: step 1 update = 0.1 g1 / (sqrt(0.001 g1^2) + 1e-8) = sign(g1) * 0.1/sqrt(0.001) = 3.16227766 sign(g1)
  //         p = p0 - 0.316227766 sign(g1) = [0.683772234, -1.683772234, 0.183772234] (eps shifts the 7th digit)
  // step 2: m = [-0.001, 0.022, 0.047], v = [1.999e-5, 1.9996e-4, 1.2991e-4]; p -= 0.1 m/(sqrt(v) + 1e-8)
  //         p = [0.706139456, -1.83935167, -0.228587105]
  // Without bias correction nothing cancels the f32 rounding of 1 - beta2 (1 - 0.999f is 1.3e-5
  // off 0.001), and the update (~4 at step 2) carries half of it: hence the looser rtol.
  Variable p = param(kP0);
  Adam adam({p}, {.lr = 0.1, .bias_correction = false});
  run(adam, p, {kG1});
  CHECK(::fathom::testing::mismatch(values(p), {0.683773234, -1.68377273, 0.183772567}, kAtol, 1e-4) == "");
  run(adam, p, {kG2});
  CHECK(::fathom::testing::mismatch(values(p), {0.706139456, -1.83935167, -0.228587105}, kAtol, 1e-4) == "");
}

// ---------------------------------------------------------------------------------------- Lamb

TEST_CASE("Lamb: trust ratio, bias-corrected step size, weight decay", "[nn]") {
  // lr 0.1, weight_decay 0.1. step 1: m = 0.1 g1, v = 0.001 g1^2
  //   update = m/(sqrt(v) + 1e-8) + 0.1 p0 = 3.16227766 sign(g1) + 0.1 p0 = [3.26226766, -3.36227266, 3.21227433]
  //   ||p0|| = sqrt(1 + 4 + 0.25) = 2.29128785, ||update|| = 5.68031461, coeff = 0.403373405 (inside [0.01, 10])
  //   step_size = 0.1 sqrt(1 - 0.999)/(1 - 0.9) = 0.0316227766
  //   p = p0 - 0.0316227766 * 0.403373405 * update = [0.958387208, -1.95711157, 0.459024913]
  // step 2: coeff = 2.2269925 / 4.38758195 = 0.507567158, step_size = 0.0235316725
  //   p = [0.95991392, -1.97335621, 0.409224814]
  Variable p = param(kP0);
  Lamb lamb({p}, {.lr = 0.1, .weight_decay = 0.1});
  run(lamb, p, {kG1});
  REQUIRE(lamb.lamb_coeffs().size() == 1);
  CHECK(lamb.lamb_coeffs()[0] == Approx(0.403373405).epsilon(1e-6));
  CHECK_VALUES(values(p), {0.958387208, -1.95711157, 0.459024913});
  run(lamb, p, {kG2});
  CHECK(lamb.lamb_coeffs()[0] == Approx(0.507567158).epsilon(1e-6));
  CHECK_VALUES(values(p), {0.95991392, -1.97335621, 0.409224814});
}

TEST_CASE("Lamb: coefficient clamped at max_coeff and min_coeff, 1 for zero weights", "[nn]") {
  // The first update is 3.16227766 sign(g1), norm 5.47721499 (weight_decay 0); step_size 0.0316227766.
  SECTION("max_coeff") {
    // p0 = [100, -200, 50]: ||p|| = 229.128785, ratio 41.8 -> clamped to 10
    // p = p0 - 0.0316227766 * 10 * 3.16227766 sign(g1) = p0 - ~1.0 sign(g1) = [99.0000032, -199.000002, 49.0000011]
    Variable p = param({100.0f, -200.0f, 50.0f});
    Lamb lamb({p}, {.lr = 0.1});
    run(lamb, p, {kG1});
    CHECK(lamb.lamb_coeffs()[0] == 10.0);
    CHECK_VALUES(values(p), {99.0000032, -199.000002, 49.0000011});
  }
  SECTION("min_coeff") {
    // p0 = [1e-3, -2e-3, 5e-4]: ||p|| = 2.29e-3, ratio 4.18e-4 -> clamped to 0.01
    // p = p0 - 0.0316227766 * 0.01 * 3.16227766 sign(g1) = p0 - ~1e-3 sign(g1) = [~3e-9, -1.00000158e-3, -4.99998946e-4]
    Variable p = param({1e-3f, -2e-3f, 5e-4f});
    Lamb lamb({p}, {.lr = 0.1});
    run(lamb, p, {kG1});
    CHECK(lamb.lamb_coeffs()[0] == Approx(0.01));
    CHECK(::fathom::testing::mismatch(values(p), {3.16226766e-09, -0.00100000158, -0.000499998946}, 1e-8, 1e-4) ==
          "");
  }
  SECTION("zero weights: coefficient 1") {
    // ||p|| = 0 -> coeff 1: p = -0.0316227766 * 3.16227766 sign(g1) = [-0.0999999684, 0.0999999842, -0.0999999895]
    Variable p = param({0.0f, 0.0f, 0.0f});
    Lamb lamb({p}, {.lr = 0.1});
    run(lamb, p, {kG1});
    CHECK(lamb.lamb_coeffs()[0] == 1.0);
    CHECK_VALUES(values(p), {-0.0999999684, 0.0999999842, -0.0999999895});
  }
  SECTION("bias_correction off") {
    // step_size = lr = 0.1; step 1 coeff = 2.29128785/5.47721499 = 0.418330822
    //   p = p0 - 0.1 * 0.418330822 * 3.16227766 sign(g1) = [0.867712597, -1.86771239, 0.367712318]
    // step 2: coeff 0.474055347 -> p = [0.878315424, -1.94146542, 0.172231011]
    Variable p = param(kP0);
    Lamb lamb({p}, {.lr = 0.1, .bias_correction = false});
    run(lamb, p, {kG1});
    CHECK_VALUES(values(p), {0.867712597, -1.86771239, 0.367712318});
    run(lamb, p, {kG2});
    CHECK(lamb.lamb_coeffs()[0] == Approx(0.474055347).epsilon(1e-6));
    CHECK_VALUES(values(p), {0.878315424, -1.94146542, 0.172231011});
  }
}

// ---------------------------------------------------------------------------------------- Lion

TEST_CASE("Lion: sign update, decoupled weight decay, sign(0) = 0", "[nn]") {
  // lr 0.1, betas (0.9, 0.99), weight_decay 0.1: p = p (1 - 0.01) - 0.1 sign(c), c = 0.9 m + 0.1 g.
  // step 1 (g = [0.1, -0.2, 0]): c = [0.01, -0.02, 0] -> sign [1, -1, 0]
  //   p = [0.99 - 0.1, -1.98 + 0.1, 0.495 - 0] = [0.89, -1.88, 0.495];  m = 0.01 g = [0.001, -0.002, 0]
  // step 2 (g = [-0.05, 0.001, 0.3]): c = 0.9 m + 0.1 g = [-0.0041, -0.0017, 0.03] -> sign [-1, -1, 1]
  //   (the second element keeps its sign from the momentum though its gradient is positive)
  //   p = [0.8811 + 0.1, -1.8612 + 0.1, 0.49005 - 0.1] = [0.9811, -1.7612, 0.39005]; m = [0.00049, -0.00197, 0.003]
  Variable p = param(kP0);
  Lion lion({p}, {.lr = 0.1, .betas = {0.9, 0.99}, .weight_decay = 0.1});
  run(lion, p, {{0.1f, -0.2f, 0.0f}});
  CHECK_VALUES(values(p), {0.89, -1.88, 0.495});
  run(lion, p, {{-0.05f, 0.001f, 0.3f}});
  CHECK_VALUES(values(p), {0.9811, -1.7612, 0.39005});
  CHECK_VALUES(lion.state(p, "exp_avg").to_vector<double>(), {0.00049, -0.00197, 0.003});
}

// ----------------------------------------------------------------------------------- Base class

TEST_CASE("Optimizer: skips params without grad, zero_grad, lr per group", "[nn]") {
  Variable a = param(kP0, "a"), b = param(kP0, "b");
  std::vector<ParamGroup> groups(2);
  groups[0].params = {a};
  groups[1].params = {b};
  groups[1].lr = 0.5;
  groups[1].weight_decay = 0.1;
  Sgd sgd(groups, {.lr = 0.1});
  CHECK(sgd.lr(0) == 0.1);
  CHECK(sgd.lr(1) == 0.5);
  CHECK(sgd.weight_decay(0) == 0.0);
  CHECK(sgd.weight_decay(1) == 0.1);

  set_grad(a, kG1);
  sgd.step();  // b has no grad: untouched, no step counted
  CHECK(sgd.step_count(a) == 1);
  CHECK(sgd.step_count(b) == 0);
  CHECK(values(b) == std::vector<double>{1.0, -2.0, 0.5});
  CHECK_VALUES(values(a), {0.99, -1.98, 0.47});

  sgd.zero_grad(/*set_to_none=*/false);
  REQUIRE(a.grad().defined());
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 0, 0});
  sgd.zero_grad();
  CHECK(!a.grad().defined());

  // Group 1 with its own lr and weight decay: p = p0 - 0.5 (g1 + 0.1 p0) = [0.9, -1.8, 0.325]
  sgd.set_lr(1, 0.5);
  set_grad(b, kG1);
  sgd.step();
  CHECK_VALUES(values(b), {0.9, -1.8, 0.325});
  sgd.set_lr(0.25);
  CHECK(sgd.lr(0) == 0.25);
  CHECK(sgd.lr(1) == 0.25);
  CHECK_THROWS_WITH(sgd.set_lr(-1.0), Catch::Contains("SGD: \"lr\" must be >= 0 (and finite), got -1"));
  CHECK_THROWS_WITH(sgd.set_lr(2, 0.1), Catch::Contains("SGD: no param group 2 (there are 2)"));
}

TEST_CASE("Adam and SGD update a group at mixed step counts exactly as one parameter at a time", "[nn]") {
  // step() hands the whole group to one multi-tensor update per step count; parameter b missed
  // the first step, so the second step updates a (step 2) and b (step 1) in different batches.
  Variable a = param(kP0, "a"), b = param(kG3, "b");
  const std::vector<float> a0 = kP0, b0 = kG3;
  SECTION("Adam") {
    const AdamOptions options{.lr = 0.05, .weight_decay = 0.01};
    Adam adam({a, b}, options);
    set_grad(a, kG1);
    adam.step();
    set_grad(a, kG2);
    set_grad(b, kG1);
    adam.step();
    CHECK(adam.step_count(a) == 2);
    CHECK(adam.step_count(b) == 1);

    auto reference = [&](const std::vector<float>& start, const std::vector<std::vector<float>>& grads) {
      Tensor p = Tensor::from_vector(start), m = Tensor::zeros({3}), v = Tensor::zeros({3});
      AdamHyper hyper{.lr = 0.05, .weight_decay = 0.01};
      for (size_t k = 0; k < grads.size(); ++k) {
        hyper.step = static_cast<int64_t>(k) + 1;
        adam_step(p, Tensor::from_vector(grads[k]), m, v, hyper);
      }
      return p;
    };
    CHECK(same_bits(a.data(), reference(a0, {kG1, kG2})));
    CHECK(same_bits(b.data(), reference(b0, {kG1})));
  }
  SECTION("SGD with momentum") {
    Sgd sgd({a, b}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
    set_grad(a, kG1);
    sgd.step();
    set_grad(a, kG2);
    set_grad(b, kG1);
    sgd.step();

    auto reference = [&](const std::vector<float>& start, const std::vector<std::vector<float>>& grads) {
      Tensor p = Tensor::from_vector(start), buffer = Tensor::zeros({3});
      SgdHyper hyper{.lr = 0.1, .momentum = 0.9, .dampening = 0.5};
      for (size_t k = 0; k < grads.size(); ++k) {
        hyper.first_step = k == 0;
        sgd_step(p, Tensor::from_vector(grads[k]), buffer, hyper);
      }
      return p;
    };
    CHECK(same_bits(a.data(), reference(a0, {kG1, kG2})));
    CHECK(same_bits(b.data(), reference(b0, {kG1})));
  }
}

TEST_CASE("Optimizer: a bad gradient anywhere in a group stops the step before any parameter changes", "[nn]") {
  Variable a = param(kP0, "a"), b = param(kP0, "b");
  Adam adam({a, b});
  set_grad(a, kG1);
  b.set_grad(Tensor::from_vector<float>(kG1).to(DType::F64));  // the wrong dtype, after a good one
  CHECK_THROWS_WITH(adam.step(), Catch::Contains("is f64 but must be f32 like its parameter"));
  CHECK(values(a) == std::vector<double>{1.0, -2.0, 0.5});
  CHECK(adam.step_count(a) == 0);
  CHECK(!adam.state(a, "exp_avg").defined());
}

TEST_CASE("Optimizer: parameter errors", "[nn]") {
  SECTION("non-f32 parameter") {
    Variable half(Tensor::zeros({3}, DType::BF16), true, "h.0.weight");
    CHECK_THROWS_WITH(Adam({half}), Catch::Contains("Adam: parameter \"h.0.weight\" is bf16, but optimizers update "
                                                    "f32 parameters only"));
  }
  SECTION("non-contiguous parameter") {
    Variable strided(Tensor::zeros({3, 2}).t(), true, "w");
    CHECK_THROWS_WITH(Sgd({strided}), Catch::Contains("SGD: parameter \"w\" (Tensor[f32, cpu, [2, 3]]) is not contiguous"));
  }
  SECTION("the same parameter twice, or two explicit names alike") {
    Variable w = param(kP0, "w"), other = param(kP0, "w");
    CHECK_THROWS_WITH(Adam({w, w}), Catch::Contains("Adam: parameter \"w\" (group 0, index 1) is given twice"));
    CHECK_THROWS_WITH(make_optimizer("Adam", {}, {{"h.0.weight", w}, {"h.0.weight", other}}),
                      Catch::Contains("Adam: two parameters are named \"h.0.weight\" (group 0, index 0 and group 0, "
                                      "index 1); names key the optimizer state, so they must be unique"));
    std::vector<ParamGroup> groups(1);
    groups[0].params = {w, other};
    groups[0].names = {"a"};
    CHECK_THROWS_WITH(Adam(groups), Catch::Contains("Adam: group 0 has 2 parameters but 1 names; give one name per "
                                                    "parameter, or none"));
  }
  SECTION("gradient of the wrong shape") {
    // set_grad checks shapes itself; a later set_data (ZeRO-3 style) can still break them apart.
    Variable w = param(kP0, "w");
    Adam adam({w});
    set_grad(w, kG1);
    w.set_data(Tensor::zeros({4}));
    CHECK_THROWS_WITH(adam.step(),
                      Catch::Contains("Adam: the gradient of \"w\" has shape [3] but the parameter has shape [4]"));
  }
  SECTION("a non-contiguous gradient is fine") {
    Variable w = param({1, 2, 3, 4, 5, 6}, "w");
    w.set_data(w.data().view({2, 3}));
    Sgd sgd({w}, {.lr = 1.0});
    w.set_grad(Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}).t());
    sgd.step();  // grad (transposed) = [[1, 3, 5], [2, 4, 6]]
    CHECK(values(w) == std::vector<double>{0, -1, -2, 2, 1, 0});
  }
}

// ----------------------------------------------------------------------------------- state_dict

TEST_CASE("state-dict keys: dotted names, Variable names, or positions", "[nn]") {
  // Module parameters carry their local names ("weight"), so two layers collide: keys fall back
  // to positions unless the dotted names of named_parameters() are given.
  Variable w0 = param(kP0, "weight"), w1 = param(kP0, "weight"), b = param(kP0, "bias");
  auto positional = make_optimizer("SGD", {}, std::vector<Variable>{w0, w1, b});
  CHECK(positional->param_key(w0) == "group0.0");
  CHECK(positional->param_key(b) == "group0.2");
  auto named = make_optimizer("SGD", {}, {{"h.0.weight", w0}, {"h.1.weight", w1}, {"h.1.bias", b}});
  CHECK(named->param_key(w1) == "h.1.weight");
  auto by_variable = make_optimizer("SGD", {}, std::vector<Variable>{w0, b});
  CHECK(by_variable->param_key(w0) == "weight");
  CHECK(by_variable->param_key(b) == "bias");
}

TEST_CASE("state_dict: save, load into a fresh optimizer, step both -> identical bits", "[nn]") {
  const OptimizerParams adam_params = {{"lr", 0.01}, {"weight_decay", 0.1}};
  const OptimizerParams sgd_params = {{"lr", 0.01}, {"momentum", 0.9}, {"nesterov", true}};
  const OptimizerParams lion_params = {{"lr", 0.01}, {"betas", {0.9, 0.99}}, {"weight_decay", 0.1}};
  const OptimizerParams lamb_params = {{"lr", 0.01}, {"weight_decay", 0.1}};
  for (const auto& [type, params] : std::vector<std::pair<std::string, OptimizerParams>>{
           {"Adam", adam_params}, {"SGD", sgd_params}, {"Lion", lion_params}, {"Lamb", lamb_params}}) {
    INFO(type);
    Variable w = param(kP0, "h.0.weight"), b = param({0.25f, -0.75f}, "h.0.bias");
    Variable unstepped = param({1.0f}, "never");
    auto first = make_optimizer(type, params, std::vector<Variable>{w, b, unstepped});
    w.set_grad(Tensor::from_vector(kG1));
    b.set_grad(Tensor::from_vector(std::vector<float>{0.5f, -0.1f}));
    first->step();
    w.set_grad(Tensor::from_vector(kG2));
    first->step();

    const OptimizerStateDict saved = first->state_dict();
    REQUIRE(saved.find_scalar("h.0.weight.step") != nullptr);
    CHECK(*saved.find_scalar("h.0.weight.step") == 2);
    CHECK(*saved.find_scalar("h.0.bias.step") == 2);
    CHECK(saved.find_scalar("never.step") == nullptr);
    CHECK(*saved.find_scalar("param_groups.0.lr") == 0.01);

    Variable w2(w.data().clone(), true, "h.0.weight"), b2(b.data().clone(), true, "h.0.bias");
    Variable unstepped2 = param({1.0f}, "never");
    // Hyperparameters other than lr and weight_decay come from the config, not the state dict.
    auto second = make_optimizer(type, params, std::vector<Variable>{w2, b2, unstepped2});
    second->set_lr(0.5);
    second->load_state_dict(saved);
    CHECK(second->lr() == 0.01);
    CHECK(second->step_count(w2) == 2);

    for (auto [p, q] : {std::pair{w, w2}, std::pair{b, b2}}) {
      p.set_grad(Tensor::from_vector(std::vector<float>(p.numel(), 0.3f)));
      q.set_grad(p.grad().clone());
    }
    first->step();
    second->step();
    CHECK(same_bits(w.data(), w2.data()));
    CHECK(same_bits(b.data(), b2.data()));
    const OptimizerStateDict after_first = first->state_dict(), after_second = second->state_dict();
    REQUIRE(after_first.tensors.size() == after_second.tensors.size());
    for (size_t i = 0; i < after_first.tensors.size(); ++i) {
      CHECK(after_first.tensors[i].first == after_second.tensors[i].first);
      CHECK(same_bits(after_first.tensors[i].second, after_second.tensors[i].second));
    }
    // The loaded state is a copy: the saved tensors are not what the second optimizer updates.
    if (!saved.tensors.empty()) CHECK(!saved.tensors[0].second.shares_storage(after_second.tensors[0].second));
  }
}

TEST_CASE("load_state_dict: errors name the entry", "[nn]") {
  Variable w = param(kP0, "w");
  Adam adam({w});
  set_grad(w, kG1);
  adam.step();
  const OptimizerStateDict good = adam.state_dict();
  CHECK(good.tensors.size() == 2);
  CHECK(good.tensors[0].first == "w.exp_avg");
  CHECK(good.tensors[1].first == "w.exp_avg_sq");

  auto without = [&](const std::string& name) {
    OptimizerStateDict dict = good;
    std::erase_if(dict.tensors, [&](const auto& entry) { return entry.first == name; });
    std::erase_if(dict.scalars, [&](const auto& entry) { return entry.first == name; });
    return dict;
  };
  Variable fresh = param(kP0, "w");
  Adam target({fresh});

  CHECK_THROWS_WITH(target.load_state_dict(without("w.exp_avg_sq")),
                    Catch::Contains("Adam.load_state_dict: missing entry \"w.exp_avg_sq\" (\"w.step\" is there, so "
                                    "Adam needs its state: exp_avg, exp_avg_sq)"));
  CHECK_THROWS_WITH(target.load_state_dict(without("param_groups.0.lr")),
                    Catch::Contains("Adam.load_state_dict: missing entry \"param_groups.0.lr\" (this optimizer has 1 "
                                    "param groups; was the state dict saved with the same groups?)"));
  OptimizerStateDict misshaped = without("w.exp_avg");
  misshaped.tensors.emplace_back("w.exp_avg", Tensor::zeros({4}));
  CHECK_THROWS_WITH(target.load_state_dict(misshaped),
                    Catch::Contains("Adam.load_state_dict: entry \"w.exp_avg\" has shape [4] but parameter \"w\" has "
                                    "shape [3]; the state dict was saved for a different model"));
  OptimizerStateDict extra = good;
  extra.tensors.emplace_back("v.exp_avg", Tensor::zeros({3}));
  CHECK_THROWS_WITH(target.load_state_dict(extra),
                    Catch::Contains("Adam.load_state_dict: unexpected entry \"v.exp_avg\": no parameter of this "
                                    "optimizer has it (Adam keeps per parameter: step, exp_avg, exp_avg_sq)"));
  OptimizerStateDict fractional = without("w.step");
  fractional.scalars.emplace_back("w.step", 1.5);
  CHECK_THROWS_WITH(target.load_state_dict(fractional),
                    Catch::Contains("Adam.load_state_dict: entry \"w.step\" must be a whole number >= 1, got 1.5"));
  // A failed load changes nothing.
  CHECK(target.step_count(fresh) == 0);
  CHECK(!target.state(fresh, "exp_avg").defined());
  // State saved by SGD does not load into Adam.
  Variable s = param(kP0, "w");
  Sgd sgd({s}, {.momentum = 0.9});
  set_grad(s, kG1);
  sgd.step();
  CHECK_THROWS_WITH(target.load_state_dict(sgd.state_dict()), Catch::Contains("missing entry \"w.exp_avg\""));
}

// ---------------------------------------------------------------------------------- the factory

TEST_CASE("make_optimizer: DeepSpeed type names, case-insensitive, with DeepSpeed's defaults", "[nn]") {
  const std::vector<Variable> params = {param(kP0)};
  CHECK(make_optimizer("adam", {}, params)->type() == "Adam");
  CHECK(make_optimizer("ADAMW", {}, params)->type() == "AdamW");
  CHECK(make_optimizer("sgd", {}, params)->type() == "SGD");
  CHECK(make_optimizer("LAMB", {}, params)->type() == "Lamb");
  CHECK(make_optimizer("Lion", {}, params)->type() == "Lion");

  auto adam = make_optimizer("Adam", {}, params);
  const AdamOptions& defaults = dynamic_cast<Adam&>(*adam).options();
  CHECK(defaults.lr == 1e-3);
  CHECK(defaults.betas == std::array<double, 2>{0.9, 0.999});
  CHECK(defaults.eps == 1e-8);
  CHECK(defaults.weight_decay == 0.0);
  CHECK(defaults.bias_correction);
  CHECK(defaults.adam_w_mode);  // "Adam" is AdamW unless adam_w_mode is false

  auto l2 = make_optimizer("Adam", {{"adam_w_mode", false}, {"betas", {0.8, 0.9}}, {"torch_adam", true}}, params);
  CHECK(!dynamic_cast<Adam&>(*l2).options().adam_w_mode);
  CHECK(dynamic_cast<Adam&>(*l2).options().betas == std::array<double, 2>{0.8, 0.9});
  auto adamw = make_optimizer("AdamW", {{"adam_w_mode", false}}, params);
  CHECK(dynamic_cast<Adam&>(*adamw).options().adam_w_mode);

  auto lamb = make_optimizer("Lamb", {{"max_coeff", 5}, {"min_coeff", 0.1}}, params);
  CHECK(dynamic_cast<Lamb&>(*lamb).options().max_coeff == 5.0);
  CHECK(dynamic_cast<Lamb&>(*lamb).options().min_coeff == 0.1);
  auto lion = make_optimizer("Lion", {}, params);
  CHECK(dynamic_cast<Lion&>(*lion).options().betas == std::array<double, 2>{0.9, 0.999});
  auto sgd = make_optimizer("SGD", {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}}, params);
  CHECK(dynamic_cast<Sgd&>(*sgd).options().nesterov);
  CHECK(sgd->lr() == 0.1);
}

TEST_CASE("make_optimizer: errors", "[nn]") {
  const std::vector<Variable> params = {param(kP0)};
  auto fails_with = [&](const std::string& type, const OptimizerParams& config, const std::string& message) {
    INFO(type << " " << message);
    CHECK_THROWS_WITH(make_optimizer(type, config, params), Catch::Contains(message));
  };
  fails_with("Adamm", {},
             "unknown optimizer type \"Adamm\"; did you mean \"Adam\"? Known types: Adam, AdamW, SGD, Lamb, Lion "
             "(case-insensitive, as in DeepSpeed)");
  fails_with("Adagrad", {},
             "unknown optimizer type \"Adagrad\". Known types: Adam, AdamW, SGD, Lamb, Lion (case-insensitive, as "
             "in DeepSpeed)");
  fails_with("Adam", {{"beta", {0.9, 0.99}}},
             "Adam: unknown optimizer parameter \"beta\"; did you mean \"betas\"? Adam takes: lr, betas, eps, "
             "weight_decay, bias_correction, adam_w_mode, torch_adam, amsgrad");
  fails_with("Lion", {{"eps", 1e-8}}, "Lion: unknown optimizer parameter \"eps\". Lion takes: lr, betas, weight_decay");
  fails_with("Adam", {{"lr", -1e-3}}, "Adam: \"lr\" must be >= 0 (and finite), got -0.001");
  fails_with("SGD", {{"momentum", -0.5}}, "SGD: \"momentum\" must be >= 0 (and finite), got -0.5");
  fails_with("AdamW", {{"betas", {0.9, 1.0}}}, "AdamW: \"betas\" must be two numbers, each in [0, 1), got [0.9, 1]");
  fails_with("Lion", {{"betas", {-0.1, 0.99}}}, "Lion: \"betas\" must be two numbers, each in [0, 1), got [-0.1, 0.99]");
  fails_with("Adam", {{"betas", {0.9}}},
             "Adam: \"betas\" must be a list of two numbers [beta1, beta2], got a list of numbers ([0.9])");
  fails_with("Adam", {{"lr", true}}, "Adam: \"lr\" must be a number, got a bool (true)");
  fails_with("Adam", {{"adam_w_mode", 1}}, "Adam: \"adam_w_mode\" must be true or false, got a number (1)");
  fails_with("Lamb", {{"max_grad_norm", 1.0}},
             "Lamb: \"max_grad_norm\" is not an optimizer parameter; use the top-level \"gradient_clipping\" config "
             "key (DeepSpeed rejects it the same way)");
  fails_with("Lamb", {{"min_coeff", 2.0}, {"max_coeff", 1.0}}, "Lamb: \"min_coeff\" (2) must be <= \"max_coeff\" (1)");
  fails_with("Adam", {{"amsgrad", true}},
             "Adam: \"amsgrad\": true is not supported (DeepSpeed's FusedAdam does not support the AMSGrad variant "
             "either); remove it or set it to false");
  fails_with("SGD", {{"nesterov", true}},
             "SGD: \"nesterov\": true needs \"momentum\" > 0 and \"dampening\" = 0 (got momentum 0, dampening 0)");
  fails_with("Adam", {{"eps", std::numeric_limits<double>::quiet_NaN()}}, "Adam: \"eps\" must be >= 0 (and finite), got nan");
}

// ------------------------------------------------------------------------------------- clipping

TEST_CASE("clip_grad_norm: total norm, scaling, no-op below the limit, NaN left alone", "[nn]") {
  Variable a = param({0, 0}, "a"), b = param({0, 0, 0}, "b"), no_grad = param({1}, "c");
  auto reset = [&] {
    set_grad(a, {3.0f, 4.0f});
    set_grad(b, {0.0f, 0.0f, 12.0f});
  };
  const std::vector<Variable> params = {a, b, no_grad};
  SECTION("above max_norm: scaled by max_norm / (norm + 1e-6)") {
    // norm = sqrt(9 + 16 + 144) = 13; factor = 6.5 / 13.000001 = 0.49999996
    reset();
    CHECK(clip_grad_norm(params, 6.5) == Approx(13.0).epsilon(1e-12));
    const double factor = 6.5 / (13.0 + 1e-6);
    CHECK_VALUES(a.grad().to_vector<double>(), {3 * factor, 4 * factor});
    CHECK_VALUES(b.grad().to_vector<double>(), {0, 0, 12 * factor});
    CHECK(std::sqrt(9 + 16 + 144) * factor < 6.5);
  }
  SECTION("below max_norm: grads untouched") {
    reset();
    CHECK(clip_grad_norm(params, 20.0) == Approx(13.0).epsilon(1e-12));
    CHECK(a.grad().to_vector<float>() == std::vector<float>{3.0f, 4.0f});
    CHECK(b.grad().to_vector<float>() == std::vector<float>{0.0f, 0.0f, 12.0f});
  }
  SECTION("NaN and Inf norms are returned and the grads left alone") {
    set_grad(a, {std::nanf(""), 4.0f});
    set_grad(b, {0.0f, 0.0f, 12.0f});
    CHECK(std::isnan(clip_grad_norm(params, 1.0)));
    CHECK(b.grad().to_vector<float>() == std::vector<float>{0.0f, 0.0f, 12.0f});
    set_grad(a, {std::numeric_limits<float>::infinity(), 4.0f});
    CHECK(std::isinf(clip_grad_norm(params, 1.0)));
    CHECK(b.grad().to_vector<float>() == std::vector<float>{0.0f, 0.0f, 12.0f});
  }
  SECTION("bad max_norm") {
    reset();
    CHECK_THROWS_WITH(clip_grad_norm(params, 0.0), Catch::Contains("clip_grad_norm: max_norm must be > 0 and finite, got 0"));
  }
}

// ------------------------------------------------------------------------------- memory tagging

TEST_CASE("optimizer state is charged to MemoryTag::OptimizerState", "[nn]") {
  // 16 floats = 64 bytes per state tensor. Temporaries of the unfused updates (Lamb, Lion) are
  // freed by the end of the step, so the counter holds exactly the state.
  const std::vector<float> sixteen(16, 0.5f);
  for (const auto& [type, tensors_per_param] : std::vector<std::pair<std::string, int64_t>>{
           {"Adam", 2}, {"Lamb", 2}, {"Lion", 1}}) {
    INFO(type);
    const int64_t base = optimizer_state_bytes();
    const int64_t other_base = memory_snapshot()[MemoryTag::Other].current;
    {
      Variable w = param(sixteen, "w");
      auto optimizer = make_optimizer(type, {}, std::vector<Variable>{w});
      CHECK(optimizer_state_bytes() == base);  // state is created on the first step
      w.set_grad(Tensor::full({16}, 0.1));
      const int64_t other_before_step = memory_snapshot()[MemoryTag::Other].current;
      optimizer->step();
      CHECK(optimizer_state_bytes() - base == tensors_per_param * 64);
      CHECK(memory_snapshot()[MemoryTag::Other].current == other_before_step);

      Variable w2 = param(sixteen, "w");
      auto loaded = make_optimizer(type, {}, std::vector<Variable>{w2});
      loaded->load_state_dict(optimizer->state_dict());
      CHECK(optimizer_state_bytes() - base == 2 * tensors_per_param * 64);
    }
    CHECK(optimizer_state_bytes() == base);
    CHECK(memory_snapshot()[MemoryTag::Other].current == other_base);
  }
}

// set_copy: the 16-bit model a master feeds, rewritten after every update — in the update's own
// pass by Adam and SGD, by a conversion after it by the others — always the new values rounded once.
TEST_CASE("set_copy: every optimizer leaves the rounded parameter in the copy", "[nn]") {
  for (const std::string type : {"AdamW", "SGD", "Lion"}) {
    INFO(type);
    Variable p = param(kP0);
    std::unique_ptr<Optimizer> optimizer;
    if (type == "AdamW") optimizer = std::make_unique<AdamW>(std::vector<ParamGroup>{{{p}}}, AdamOptions{.lr = 0.1});
    if (type == "SGD") optimizer = std::make_unique<Sgd>(std::vector<ParamGroup>{{{p}}}, SgdOptions{.lr = 0.1, .momentum = 0.9});
    if (type == "Lion") optimizer = std::make_unique<Lion>(std::vector<ParamGroup>{{{p}}}, LionOptions{.lr = 0.1});
    CHECK(optimizer->fused_copies() == (type != "Lion"));
    for (DType dtype : {DType::BF16, DType::F16}) {
      const Tensor copy = Tensor::zeros({3}, dtype);
      optimizer->set_copy(p, copy);
      run(*optimizer, p, {kG1, kG2});
      CHECK(copy.to(DType::F32).to_vector<float>() == p.data().to(dtype).to(DType::F32).to_vector<float>());
    }
    optimizer->set_copy(p, Tensor());  // removed: the old copy is left alone
    const std::vector<float> before = p.data().to_vector<float>();
    run(*optimizer, p, {kG1});
    CHECK(p.data().to_vector<float>() != before);
    CHECK_THROWS_WITH(optimizer->set_copy(p, Tensor::zeros({4}, DType::BF16)),
                      Catch::Contains("the copy of \"w\"") && Catch::Contains("must be a contiguous bf16, f16 or f32 "
                                                                              "tensor of 3 elements on cpu"));
  }
}

TEST_CASE("load_param_state: one parameter's state adopted, the copy kept, bad state refused", "[nn]") {
  Variable w = param(kP0, "w");
  AdamW first(std::vector<ParamGroup>{{{w}}}, AdamOptions{.lr = 0.1});
  run(first, w, {kG1, kG2});
  Variable v(w.data().clone(), true, "w");  // the same parameter, in a fresh optimizer
  AdamW second(std::vector<ParamGroup>{{{v}}}, AdamOptions{.lr = 0.1});
  const Tensor copy = Tensor::zeros({3}, DType::BF16);
  second.set_copy(v, copy);
  second.load_param_state(v, 2, {first.state(w, "exp_avg").clone(), first.state(w, "exp_avg_sq").clone()});
  CHECK(second.step_count(v) == 2);
  run(first, w, {kG1});
  run(second, v, {kG1});
  CHECK(same_bits(w.data(), v.data()));
  CHECK(copy.to(DType::F32).to_vector<float>() == v.data().to(DType::BF16).to(DType::F32).to_vector<float>());
  // load_state_dict keeps set_copy's copy as well.
  second.load_state_dict(first.state_dict());
  run(second, v, {kG2});
  CHECK(copy.to(DType::F32).to_vector<float>() == v.data().to(DType::BF16).to(DType::F32).to_vector<float>());

  CHECK_THROWS_WITH(second.load_param_state(v, 2, {Tensor::zeros({3})}),
                    Catch::Contains("AdamW.load_param_state: 1 state tensors for \"w\"; AdamW keeps 2"));
  CHECK_THROWS_WITH(second.load_param_state(v, 2, {Tensor::zeros({4}), Tensor::zeros({3})}),
                    Catch::Contains("state \"exp_avg\" of \"w\" is [4] f32; expected [3] f32"));
  CHECK_THROWS_WITH(second.load_param_state(v, 0, {Tensor::zeros({3}), Tensor::zeros({3})}),
                    Catch::Contains("step must be >= 1, got 0"));
}
