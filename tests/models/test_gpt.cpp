#include <cmath>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "models/gpt.h"
#include "models/decoder.h"
#include "models/generation.h"
#include "models/gpt_weights.h"
#include "nn/safetensors.h"
#include "test_util.h"
#include "kernels/elementwise.h"
#include "kernels/reduction.h"
#include "nn/loss.h"

using namespace fathom;
using namespace fathom::models;

TEST_CASE("the gpt2-124M preset has GPT-2's parameter count and names", "[models]") {
  GPTConfig config = GPTConfig::preset("gpt2-124M");
  const GPT gpt(config);
  CHECK(gpt.parameter_count() == 124'439'808);
  CHECK(config.parameter_count() == 124'439'808);  // counted without building
  const auto params = gpt.named_parameters();
  CHECK(params.front().first == "transformer.wte.weight");
  CHECK(params[1].first == "transformer.wpe.weight");
  CHECK(params[2].first == "transformer.h.0.ln_1.weight");
  CHECK(params[4].first == "transformer.h.0.attn.c_attn.weight");
  CHECK(params.back().first == "transformer.ln_f.bias");  // lm_head.weight is tied to wte
  CHECK(gpt.lm_head->weight.same(gpt.transformer->wte->weight));
  CHECK(gpt.transformer->h->size() == 12);
}

TEST_CASE("GPT forward shapes, initialisation and errors", "[models]") {
  GPTConfig config = GPTConfig::preset("tiny");
  GPT gpt(config);
  const Tensor idx = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Variable logits = gpt(Variable(idx));
  CHECK(logits.sizes() == Shape{2, 3, 256});
  // GPT-2 init: residual projections are scaled down.
  const double std_proj = std::sqrt(var(gpt.parameter("transformer.h.0.attn.c_proj.weight").data().to(DType::F64)).item());
  const double std_fc = std::sqrt(var(gpt.parameter("transformer.h.0.mlp.c_fc.weight").data().to(DType::F64)).item());
  CHECK(std_fc == Approx(0.02).epsilon(0.1));
  CHECK(std_proj == Approx(0.02 / std::sqrt(4.0)).epsilon(0.15));
  CHECK(gpt.parameter("transformer.h.1.ln_2.weight").data().to_vector<float>()[0] == 1.0f);
  CHECK_THROWS_WITH(gpt(Variable(Tensor::zeros({1, 65}, DType::I64))), Catch::Contains("sequence length 65 exceeds block_size 64"));
  CHECK_THROWS_WITH(GPTConfig::preset("huge"), Catch::Contains("unknown GPT preset \"huge\"; use tiny, small or gpt2-124M"));
  config.n_head = 3;
  CHECK_THROWS_WITH(GPT(config), Catch::Contains("n_embd (64) must be a multiple of n_head (3)"));
}

TEST_CASE("GPT configs: the count without building agrees with the built model; sizes are bounded", "[models]") {
  for (const char* name : {"tiny", "small"})
    for (bool tied : {true, false}) {
      GPTConfig config = GPTConfig::preset(name);
      config.tied_embeddings = tied;
      CHECK(config.parameter_count() == GPT(config).parameter_count());
    }
  GPTConfig huge = GPTConfig::preset("tiny");
  huge.n_layer = 100'000'000;
  CHECK_THROWS_WITH(huge.validate(), Catch::Contains("GPT config: n_layer 100000000 is above the limit of 10000"));
}

TEST_CASE("the gemm and fused attention kernels compute the same function (f32 logits and gradients)", "[models]") {
  GPTConfig config = GPTConfig::preset("tiny");
  config.n_layer = 2;
  std::vector<int64_t> tokens;
  for (int i = 0; i < 3 * 40; ++i) tokens.push_back((i * 11 + i / 3) % 256);
  const Tensor idx = Tensor::from_vector<int64_t>(tokens, {3, 40});
  auto run = [&](nn::AttentionKernel kernel) {
    config.attention = kernel;
    GPT gpt(config, 5);
    const Variable logits = gpt(Variable(idx));
    autograd::sum(autograd::mul(logits, logits)).backward();
    std::vector<Tensor> out{logits.data().clone()};
    for (const auto& [name, p] : gpt.named_parameters()) out.push_back(p.grad());
    return out;
  };
  const std::vector<Tensor> fused = run(nn::AttentionKernel::Fused), gemm = run(nn::AttentionKernel::Gemm);
  REQUIRE(fused.size() == gemm.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO((i == 0 ? std::string("logits") : "gradient " + std::to_string(i)));
    // f32 sums in another order (bias gradients cancel): errors scale with the tensor's largest value.
    const double largest = max(abs(fused[i])).item();
    FATHOM_REQUIRE_CLOSE(gemm[i], fused[i], 1e-5 * largest, 1e-4);
  }
}

TEST_CASE("attention kernel names: auto, fused, gemm; FATHOM_ATTENTION picks for auto", "[models]") {
  using nn::AttentionKernel;
  CHECK(nn::parse_attention_kernel("gemm", "--attention") == AttentionKernel::Gemm);
  CHECK_THROWS_WITH(nn::parse_attention_kernel("flash", "--attention"),
                    Catch::Contains("--attention: unknown attention kernel \"flash\"; use \"auto\", \"fused\" or \"gemm\""));
  const Tensor q = Tensor::zeros({1, 2, 8, 4}, DType::BF16);
  CHECK(nn::attention_probability_bytes(q) == 1 * 2 * 8 * 8 * 2);
  CHECK(nn::resolve_attention_kernel(AttentionKernel::Auto, q) == AttentionKernel::Gemm);
  CHECK(nn::resolve_attention_kernel(AttentionKernel::Auto, q.to(DType::F32)) == AttentionKernel::Gemm);
  // 2 x 16 x 8192^2 bf16 probabilities are 4 GiB: too many to keep, the fused kernel takes over
  // (a broadcast view: the shape is all that matters).
  const Tensor long_q = Tensor::zeros({1, 1, 1, 1}, DType::BF16).expand({2, 16, 8192, 64});
  CHECK(nn::attention_probability_bytes(long_q) == int64_t{4} << 30);
  CHECK(nn::resolve_attention_kernel(AttentionKernel::Auto, long_q) == AttentionKernel::Fused);
  CHECK(nn::resolve_attention_kernel(AttentionKernel::Gemm, long_q) == AttentionKernel::Gemm);
  setenv("FATHOM_ATTENTION", "fused", 1);
  CHECK(nn::resolve_attention_kernel(AttentionKernel::Auto, q) == AttentionKernel::Fused);
  CHECK(nn::resolve_attention_kernel(AttentionKernel::Gemm, q) == AttentionKernel::Gemm);  // explicit wins
  setenv("FATHOM_ATTENTION", "sdpa", 1);
  CHECK_THROWS_WITH(nn::resolve_attention_kernel(AttentionKernel::Auto, q),
                    Catch::Contains("FATHOM_ATTENTION: unknown attention kernel \"sdpa\""));
  unsetenv("FATHOM_ATTENTION");
}

TEST_CASE("a tiny GPT learns a repeated sequence", "[models]") {
  GPT gpt(GPTConfig::preset("tiny"), 7);
  std::vector<int64_t> tokens;
  for (int i = 0; i < 4 * 17; ++i) tokens.push_back((i * 7) % 23);
  const Tensor all = Tensor::from_vector<int64_t>(tokens, {4, 17});
  const Tensor inputs = all.narrow(1, 0, 16).contiguous(), targets = all.narrow(1, 1, 16).contiguous();
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    gpt.zero_grad();
    const Variable loss = nn::cross_entropy(gpt(Variable(inputs)), targets);
    loss.backward();
    autograd::NoGradGuard no_grad;
    for (const auto& p : gpt.parameters()) p.data().copy_(sub(p.data(), mul(p.grad(), 0.5)));  // plain SGD
    (step == 0 ? first : last) = loss.item();
  }
  INFO("loss " << first << " -> " << last);
  CHECK(first == Approx(std::log(256.0)).epsilon(0.05));
  CHECK(last < first * 0.6);
}

namespace {
std::string temp_path(const std::string& name) { return "/tmp/fathom_test_" + std::to_string(::getpid()) + "_" + name; }
}  // namespace

TEST_CASE("GPT weights round-trip through GPT-2's safetensors layout", "[models]") {
  const GPTConfig config = GPTConfig::preset("tiny");
  GPT source(config, 1), target(config, 2);
  const std::string path = temp_path("gpt.safetensors");
  save_gpt2_safetensors(source, path);
  const nn::SafetensorsFile file(path);
  CHECK(file.metadata().at("format") == "pt");
  CHECK(file.info("transformer.h.0.attn.c_attn.weight").shape == Shape{64, 192});  // Conv1D: [in, out]
  CHECK_FALSE(file.contains("lm_head.weight"));                                    // tied: transformers re-ties
  load_gpt2_safetensors(target, path);
  const Variable idx(Tensor::from_vector<int64_t>({3, 1, 4, 1, 5}, {1, 5}));
  CHECK(source(idx).data().to_vector<float>() == target(idx).data().to_vector<float>());
  std::remove(path.c_str());
}

TEST_CASE("GPT loads the hub checkpoint's bare names and ignores its mask buffers", "[models]") {
  const GPTConfig config = GPTConfig::preset("tiny");
  GPT source(config, 3), target(config, 4);
  const std::string path = temp_path("hub.safetensors");
  save_gpt2_safetensors(source, path);
  std::vector<std::pair<std::string, Tensor>> hub;
  for (auto& [name, tensor] : nn::load_safetensors(path)) hub.emplace_back(name.substr(std::string("transformer.").size()), tensor);
  hub.emplace_back("h.0.attn.bias", Tensor::ones({1, 1, 64, 64}));
  hub.emplace_back("h.1.attn.masked_bias", Tensor::scalar(-1e4));
  nn::save_safetensors(path, hub);
  load_gpt2_safetensors(target, path);
  const Variable idx(Tensor::from_vector<int64_t>({9, 8, 7}, {1, 3}));
  CHECK(source(idx).data().to_vector<float>() == target(idx).data().to_vector<float>());

  GPT bigger(GPTConfig::preset("small"));
  CHECK_THROWS_WITH(load_gpt2_safetensors(bigger, path), Catch::Contains("\"wte.weight\" has shape [256, 64] but the model expects [512, 256]"));
  hub.emplace_back("h.7.mlp.c_fc.weight", Tensor::zeros({2}));
  nn::save_safetensors(path, hub);
  CHECK_THROWS_WITH(load_gpt2_safetensors(target, path), Catch::Contains("unexpected tensor \"h.7.mlp.c_fc.weight\""));
  std::remove(path.c_str());
}

TEST_CASE("transformers' GPT2LMHeadModel loads Fathom's file and gives the same logits", "[models]") {
  if (std::system("python3 -c 'import transformers, torch, safetensors' >/dev/null 2>&1") != 0) {
    WARN("skipped: python3 with transformers, torch and safetensors is not available here "
         "(pip install transformers torch safetensors to run this check)");
    return;
  }
  const GPTConfig config = GPTConfig::preset("tiny");
  GPT model(config, 5);
  const std::string path = temp_path("hf.safetensors"), logits_path = temp_path("hf_logits.txt");
  save_gpt2_safetensors(model, path);
  const std::string script = std::string(FATHOM_TEST_SOURCE_DIR) + "/models/hf_gpt2_logits.py";
  REQUIRE(std::system(("python3 " + script + " " + path + " " + logits_path).c_str()) == 0);
  std::ifstream in(logits_path);
  std::vector<double> theirs;
  for (double v; in >> v;) theirs.push_back(v);
  const auto ours = model(Variable(Tensor::from_vector<int64_t>({1, 2, 3, 4}, {1, 4}))).data().to_vector<double>();
  CHECK(fathom::testing::mismatch(ours, theirs, 1e-4, 1e-4) == "");
  std::remove(path.c_str());
  std::remove(logits_path.c_str());
}

TEST_CASE("KV-cache logits equal the full-prefix forward (GPT-2's configuration of the decoder)", "[models]") {
  const DecoderConfig config = DecoderConfig::preset("gpt2-tiny");
  Decoder model(config, 11);
  model.eval();
  const std::vector<int64_t> prompt = {5, 17, 200, 3, 3, 99, 42};
  const int64_t T = static_cast<int64_t>(prompt.size());
  const Tensor full = model(Variable(Tensor::from_vector<int64_t>(prompt, {1, T}))).data();  // [1, T, V]

  KVCache one_by_one = model.make_cache(1), prefix_then_one = model.make_cache(1);
  next_token_logits(model, prefix_then_one,
                    Tensor::from_vector<int64_t>(std::vector<int64_t>(prompt.begin(), prompt.end() - 1), {1, T - 1}));
  const Tensor last = next_token_logits(model, prefix_then_one, Tensor::from_vector<int64_t>({prompt.back()}, {1, 1}));
  for (int64_t t = 0; t < T; ++t) {
    const Tensor step = next_token_logits(model, one_by_one, Tensor::from_vector<int64_t>({prompt[t]}, {1, 1}));
    INFO("position " << t);
    CHECK(fathom::testing::mismatch(step.reshape({config.vocab_size}), full.select(0, 0).select(0, t), 1e-5, 1e-5) == "");
  }
  CHECK(fathom::testing::mismatch(last.reshape({config.vocab_size}), full.select(0, 0).select(0, T - 1), 1e-5, 1e-5) == "");
  CHECK(one_by_one.position == T);
  CHECK_THROWS_WITH(next_token_logits(model, one_by_one, Tensor::zeros({1, 60}, DType::I64)),
                    Catch::Contains("60 more positions overflow the cache at 7 of 64"));

  Generator gen(1);
  const Tensor logits = Tensor::from_vector<float>({0.1f, 3.0f, 0.2f});
  CHECK(sample_token(logits, 0.0, 0, gen) == 1);   // greedy
  CHECK(sample_token(logits, 1.0, 1, gen) == 1);   // top-1 is greedy too
}

TEST_CASE("nucleus sampling keeps the fewest most likely tokens that reach top_p", "[models]") {
  using models::sample_token;
  Generator gen(2);
  // Probabilities 0.5, 0.3, 0.2 (logits are their logs).
  const Tensor logits = Tensor::from_vector<float>({std::log(0.5f), std::log(0.3f), std::log(0.2f)});
  std::vector<int> seen_08(3, 0), seen_05(3, 0), seen_all(3, 0);
  for (int i = 0; i < 400; ++i) {
    ++seen_08[sample_token(logits, 1.0, 0, gen, 0.79)];
    ++seen_05[sample_token(logits, 1.0, 0, gen, 0.49)];
    ++seen_all[sample_token(logits, 1.0, 0, gen, 1.0)];
  }
  CHECK(seen_08[2] == 0);  // 0.5 + 0.3 reach 0.79: the third is cut
  CHECK(seen_08[0] > 0);
  CHECK(seen_08[1] > 0);
  CHECK(seen_05[0] == 400);  // the first alone reaches 0.49
  CHECK(seen_all[2] > 0);
  CHECK_THROWS_WITH(sample_token(logits, 1.0, 0, gen, 0.0), Catch::Contains("top_p 0 must be in (0, 1]"));
}

TEST_CASE("GPT is a list of layers a pipeline can cut anywhere, with its embedding tie declared", "[models]") {
  models::GPTConfig config = models::GPTConfig::preset("tiny");
  models::GPT model(config, 4);
  REQUIRE(model.num_layers() == 4);  // embeddings, 2 blocks, final norm + head
  const autograd::Variable idx(Tensor::from_vector<int64_t>({1, 5, 9, 2, 7, 3}, {2, 3}));
  const std::vector<float> whole = model(idx).data().to_vector<float>();
  for (size_t cut = 0; cut <= model.num_layers(); ++cut) {
    INFO("cut after layer " << cut);
    const autograd::Variable first = model.forward_layers(idx, 0, cut);
    CHECK(model.forward_layers(first, cut).data().to_vector<float>() == whole);
  }
  // Every parameter belongs to one layer; the tied embedding to the first and the last.
  std::map<std::string, std::vector<size_t>> layers_of;
  for (size_t layer = 0; layer < model.num_layers(); ++layer)
    for (const std::string& name : model.layer_parameters(layer)) layers_of[name].push_back(layer);
  for (const auto& [name, parameter] : model.named_parameters()) {
    INFO(name);
    REQUIRE(layers_of.count(name) == 1);
    if (name == "transformer.wte.weight") CHECK(layers_of[name] == std::vector<size_t>{0, 3});
    else CHECK(layers_of[name].size() == 1);
  }
  CHECK(layers_of.size() == model.named_parameters().size());
  REQUIRE(model.ties().size() == 1);
  CHECK(model.ties()[0].parameter == "transformer.wte.weight");
  CHECK(model.ties()[0].layers == std::vector<size_t>{0, 3});
  config.tied_embeddings = false;
  CHECK(models::GPT(config, 4).ties().empty());
  CHECK_THROWS_WITH(model.forward_layer(4, idx), Catch::Contains("GPT: layer 4 of 4 does not exist"));
}
