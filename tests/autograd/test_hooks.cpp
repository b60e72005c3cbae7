#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions.h"

using namespace fathom;
using namespace fathom::autograd;

TEST_CASE("grad-ready hooks run once per backward, when the gradient is final", "[autograd]") {
  const Variable w1(Tensor::ones({2}, DType::F64), true, "w1");
  const Variable w2(Tensor::ones({2}, DType::F64), true, "w2");
  std::vector<std::string> events;
  std::vector<double> seen;
  std::vector<HookHandle> handles;
  for (const Variable& w : {w1, w2})
    handles.push_back(w.add_grad_ready_hook([&](const Variable& v) {
      events.push_back(v.name());
      seen.push_back(v.grad().to_vector<double>()[0]);
    }));
  const Variable x(Tensor::full({2}, 3.0, DType::F64));
  for (int micro = 0; micro < 3; ++micro) {
    // w1 is used twice in the graph; its hook must still run once, after both contributions.
    const Variable h = (x * w1) * w1 + x * w2;
    sum(h).backward();
  }

  REQUIRE(events.size() == 6);
  CHECK(std::count(events.begin(), events.end(), "w1") == 3);
  CHECK(std::count(events.begin(), events.end(), "w2") == 3);
  // The gradient a hook sees is final and accumulated: w1: 2*x*w1 = 6 per micro-step.
  std::vector<double> w1_seen;
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i] == "w1") w1_seen.push_back(seen[i]);
  CHECK(w1_seen == std::vector<double>{6, 12, 18});
}

TEST_CASE("node pre-hooks see and may change incoming gradients", "[autograd]") {
  const Variable x(Tensor::ones({3}, DType::F64), true, "x");
  const Variable z = x * 2.0;
  int calls = 0;
  z.grad_fn()->add_pre_hook([&](TensorList& grads) {
    ++calls;
    grads[0] = mul(grads[0], 10.0);
  });
  sum(z).backward();
  CHECK(calls == 1);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{20, 20, 20});
}

TEST_CASE("end-of-backward callbacks run after every node and hook", "[autograd]") {
  const Variable w(Tensor::ones({2}, DType::F64), true, "w");
  std::vector<std::string> events;
  const HookHandle hook = w.add_grad_ready_hook([&](const Variable&) {
    events.push_back("hook");
    queue_backward_callback([&] { events.push_back("queued"); });  // e.g. flush the last bucket
  });
  const int id = add_post_backward_callback([&] { events.push_back("post"); });
  sum(w * 3.0).backward();
  sum(w * 3.0).backward();
  remove_post_backward_callback(id);
  sum(w * 3.0).backward();
  CHECK(events == std::vector<std::string>{"hook", "queued", "post", "hook", "queued", "post", "hook", "queued"});
  CHECK_FALSE(in_backward());
  CHECK_THROWS_WITH(queue_backward_callback([] {}), Catch::Contains("no backward is running"));
}

TEST_CASE("grad-ready hooks are removed with their handle", "[autograd]") {
  const Variable w(Tensor::ones({2}, DType::F64), true, "w");
  int first = 0, second = 0;
  HookHandle a = w.add_grad_ready_hook([&](const Variable&) { ++first; });
  {
    const HookHandle b = w.add_grad_ready_hook([&](const Variable&) { ++second; });
    CHECK(w.grad_ready_hook_count() == 2);
    sum(w * 2.0).backward();
  }  // b removed here
  CHECK(w.grad_ready_hook_count() == 1);
  sum(w * 2.0).backward();
  HookHandle moved = std::move(a);
  CHECK_FALSE(a.active());
  CHECK(moved.active());
  moved.reset();
  CHECK(w.grad_ready_hook_count() == 0);
  sum(w * 2.0).backward();
  CHECK(first == 2);
  CHECK(second == 1);

  // A hook that removes itself while running, and a handle that outlives its parameter.
  HookHandle self;
  int calls = 0;
  self = w.add_grad_ready_hook([&](const Variable&) {
    ++calls;
    self.reset();
  });
  sum(w * 2.0).backward();
  sum(w * 2.0).backward();
  CHECK(calls == 1);
  HookHandle orphan;
  {
    const Variable temporary(Tensor::ones({2}, DType::F64), true, "temporary");
    orphan = temporary.add_grad_ready_hook([](const Variable&) {});
  }
  orphan.reset();  // the parameter is gone: nothing to remove, no crash
}
