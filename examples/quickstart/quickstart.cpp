// DeepSpeed's getting-started tutorial in C++: one Linear(768, 10) layer trained on a synthetic
// classification task, driven by ds_config.json (fp16, ZeRO stage 2). README.md walks through it.
//
//   build/examples/quickstart/quickstart [--config FILE] [--steps N]
//   mpirun -np 2 build/examples/quickstart/quickstart
//   build/bin/fathom --num_procs 2 build/examples/quickstart/quickstart
#include <fathom.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

namespace nn = fathom::nn;
using fathom::DType;
using fathom::Tensor;
using fathom::autograd::Variable;

struct MyModel : nn::Module {
  std::shared_ptr<nn::Linear> layer;
  MyModel() { layer = register_module("layer", std::make_shared<nn::Linear>(768, 10)); }
  Variable forward(const Variable& x) override { return (*layer)(x); }
};

// 1024 samples in 10 classes: each input is its class's random 768-dim centre plus unit noise,
// so there is something to learn. The same seed on every rank gives every rank the same data
// set; the loader gives each rank its part of every batch.
std::shared_ptr<fathom::TensorDataset> make_dataset(DType input_dtype) {
  fathom::Generator gen(/*seed=*/42);
  const Tensor centres = fathom::normal({10, 768}, gen);
  const Tensor labels = fathom::randint({1024}, gen, 0, 10);  // i64 [1024]
  const Tensor inputs = fathom::add(fathom::embedding(labels, centres), fathom::normal({1024, 768}, gen));
  return std::make_shared<fathom::TensorDataset>(inputs.to(input_dtype), labels);
}

struct Options {
  std::string config = QUICKSTART_DEFAULT_CONFIG;  // the ds_config.json beside this file
  int64_t steps = 50;
};

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--config" && i + 1 < argc) options.config = argv[++i];
    else if (arg == "--steps" && i + 1 < argc) options.steps = std::stoll(argv[++i]);
    else throw std::invalid_argument("unknown argument \"" + arg + "\"; usage: quickstart [--config FILE] [--steps N]");
  }
  if (options.steps < 1) throw std::invalid_argument("--steps must be at least 1");
  return options;
}

int train(const Options& options, const fathom::parallel::Runtime& runtime) {
  auto config = fathom::Config::from_file(options.config);
  // fp16/bf16 models compute in 16 bits and take 16-bit inputs (DeepSpeed: `inputs.half()`).
  const DType input_dtype = config.fp16.enabled ? DType::F16 : config.bf16.enabled ? DType::BF16 : DType::F32;
  auto model = std::make_shared<MyModel>();

  auto [engine, optimizer, loader, scheduler] =
      fathom::initialize(config, model, /*optimizer=*/nullptr, make_dataset(input_dtype), runtime.groups());

  // Replaces the engine's own log line: rank 0 prints every steps_per_print steps. The loss is
  // the global batch's mean over all ranks, so every rank sees the same numbers.
  const int64_t print_every = config.steps_per_print;
  double first_loss = 0.0;
  engine->on_step([&](const fathom::StepReport& r) {
    if (r.step == 1) first_loss = r.loss;
    if (runtime.is_main_process() && (r.step == 1 || r.step % print_every == 0)) {
      std::printf("step %3lld | loss %.4f | loss scale %.0f%s\n", (long long)r.step, r.loss, r.loss_scale,
                  r.skipped ? " | overflow: step skipped" : "");
      std::fflush(stdout);
    }
  });

  while (engine->global_steps() < options.steps) {  // as many epochs as the steps need
    for (const auto& batch : *loader) {
      auto outputs = (*engine)(Variable(batch.inputs), batch.sample_index);
      auto loss = nn::cross_entropy(outputs, batch.targets, batch.loss_normaliser);
      engine->backward(loss);
      engine->step();
      if (engine->global_steps() == options.steps) break;
    }
  }

  const double final_loss = engine->last_report().loss;
  const bool learned = final_loss < first_loss;
  if (runtime.is_main_process()) {
    std::printf("final loss %.4f after %lld steps (first %.4f)%s\n", final_loss, (long long)options.steps, first_loss,
                learned ? "" : ": the loss did not fall");
    std::printf("memory per rank: %s\n", fathom::format_model_state_bytes(fathom::model_state_bytes()).c_str());
  }
  return learned ? EXIT_SUCCESS : EXIT_FAILURE;
}

int main(int argc, char** argv) {
  fathom::parallel::Runtime runtime(argc, argv);  // MPI up: rank, size (one rank without mpirun)
  // One rank's error ends the whole job with its message (the others may be waiting for it).
  const auto fail = [&](const std::string& message) {
    if (runtime.size() > 1) runtime.abort(message);
    std::fprintf(stderr, "fathom: %s\n", message.c_str());
    return EXIT_FAILURE;
  };
  try {
    return train(parse_options(argc, argv), runtime);
  } catch (const fathom::Error& e) {
    return fail(e.message());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
