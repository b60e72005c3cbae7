// The C++ snippets of docs/nn_io.md, verbatim (docs_check compares them); "docs:skip" lines are
// the scaffolding the reader does not see.
#include <catch2/catch.hpp>  // docs:skip
#include <fathom.h>  // docs:skip
#include "docs_sandbox.h"  // docs:skip
#include "nn/safetensors.h"
using namespace fathom;

TEST_CASE("nn_io.md: safetensors") {  // docs:skip
  docs_test::Sandbox sandbox("safetensors");  // docs:skip
  Tensor wte = Tensor::arange(12).reshape({4, 3});  // docs:skip
  Tensor w = Tensor::ones({2, 6});  // docs:skip
  int tensors = 0;  // docs:skip
nn::save_safetensors("model.safetensors", {{"wte.weight", wte}, {"h.0.attn.c_attn.weight", w.t()}},
                     {{"step", "1200"}});

nn::SafetensorsFile file("model.safetensors");  // mmap + full header validation
for (const std::string& name : file.names()) {   // sorted
  const nn::SafetensorsTensorInfo& info = file.info(name);  // dtype, shape, data offsets
  Tensor t = file.get(name);                      // view of the mapping when aligned, else a copy
    tensors += info.shape == t.sizes();  // docs:skip
}
file.metadata();                                  // std::map<std::string, std::string>

std::map<std::string, Tensor> all = nn::load_safetensors("model.safetensors");  // owned copies
  CHECK(tensors == 2);  // docs:skip
  CHECK(file.metadata().at("step") == "1200");  // docs:skip
  CHECK(all.at("h.0.attn.c_attn.weight").sizes() == Shape{6, 2});  // docs:skip
}  // docs:skip

TEST_CASE("nn_io.md: LR schedules") {  // docs:skip
  nn::Linear model(2, 2);  // docs:skip
  auto optimizer = nn::make_optimizer("AdamW", {{"lr", 3e-4}}, model.named_parameters());  // docs:skip
auto scheduler = nn::make_lr_scheduler("WarmupDecayLR",
    {{"total_num_steps", 10000}, {"warmup_max_lr", 3e-4}, {"warmup_num_steps", 500}}, /*base_lr=*/3e-4);
scheduler->get_lr();     // the lr in force before the first step (DeepSpeed sets one at construction)
for (int step = 0; step < 1000; ++step) {
  optimizer->step();
  scheduler->step();
  optimizer->set_lr(scheduler->get_lr());  // or get_lrs(), one per parameter group
}
nn::LRSchedulerState state = scheduler->state_dict();  // {last_batch_iteration}
scheduler->load_state_dict(state);                      // recomputes the lrs at that iteration
  CHECK(state.last_batch_iteration == 999);  // docs:skip
  CHECK(optimizer->lr() == scheduler->get_lr());  // docs:skip
}  // docs:skip
