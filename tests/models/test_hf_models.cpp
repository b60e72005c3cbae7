// Hugging Face model folders in and out: config.json (v4 and v5 layouts), single and sharded
// safetensors, the errors a wrong folder gets, and transformers itself as the peer (skipped with
// a notice where python3 lacks it): logits, the loss and every gradient, 100 greedy tokens, and
// Fathom's exported folder loaded back by AutoModelForCausalLM.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/nn_functions.h"
#include "kernels/reduction.h"
#include "models/generation.h"
#include "core/text_file.h"
#include "models/gpt2_adapter.h"
#include "models/gpt2_hf_config.h"
#include "models/gpt_weights.h"
#include "models/model_spec.h"
#include "models/hf_config.h"
#include "models/hf_weights.h"
#include "nn/deferred_init.h"
#include "nn/loss.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::models;
namespace fs = std::filesystem;

namespace {

// A fresh folder under /tmp, removed with the test process's other folders at exit.
std::string temp_dir(const std::string& name) {
  static const std::string root = "/tmp/fathom_test_" + std::to_string(::getpid());
  static const struct Cleanup {
    ~Cleanup() { fs::remove_all(root); }
  } cleanup;
  const std::string dir = root + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

DecoderConfig config_of(const std::string& json) { return decoder_config_from_hf(parse_json(json), "config.json"); }

const std::string kLlamaV5 = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "dtype": "float32", "head_dim": 16, "hidden_act": "silu",
  "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 176, "max_position_embeddings": 128,
  "mlp_bias": false, "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
  "pad_token_id": null, "pretraining_tp": 1, "rms_norm_eps": 1e-06,
  "rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                      "original_max_position_embeddings": 32, "rope_theta": 500000.0, "rope_type": "llama3"},
  "tie_word_embeddings": false, "transformers_version": "5.25.0", "use_cache": true, "vocab_size": 256})";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

bool transformers_available() {
  if (std::system("python3 -c 'import transformers, torch, safetensors' >/dev/null 2>&1") == 0) return true;
  WARN("skipped: python3 with transformers, torch and safetensors is not available here "
       "(scripts/setup --peers, or pip install transformers torch safetensors, to run this check)");
  return false;
}

std::string peer_script() { return std::string(FATHOM_TEST_SOURCE_DIR) + "/models/hf_decoder_peer.py"; }

std::vector<int64_t> peer_ids() {
  return {3, 17, 42, 5, 99, 7, 200, 1, 64, 33, 12, 250, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 255, 128};
}

// A random tiny `kind` made and saved by transformers in a fresh folder, with its reference
// outputs (hf_decoder_peer.py).
std::string make_peer(const std::string& kind) {
  const std::string dir = temp_dir("peer_" + kind);
  REQUIRE(std::system(("python3 " + peer_script() + " make " + kind + " " + dir + " 2>/dev/null").c_str()) == 0);
  return dir;
}

// The model's logits of the peer's ids against transformers', then its next-token loss (position t
// predicts token t + 1, as transformers' causal-LM loss), back-propagated; returns the logits.
Variable check_logits_and_loss(Decoder& model, const nn::SafetensorsFile& reference) {
  const Tensor ids = Tensor::from_vector(peer_ids(), {2, 12});
  const Variable logits = model(Variable(ids));
  CHECK(testing::mismatch(logits.data(), reference.get("logits"), 1e-5, 1e-5) == "");
  const Variable loss = nn::cross_entropy(autograd::narrow(logits, 1, 0, 11), ids.narrow(1, 1, 11).contiguous());
  CHECK(loss.data().item() == Approx(reference.get("loss").item()).epsilon(1e-6));
  autograd::backward({loss});
  return logits;
}

// Greedy decoding by re-running the whole prefix (the reference the cached path is checked against).
std::vector<int64_t> greedy(Decoder& model, std::vector<int64_t> ids, int64_t new_tokens) {
  autograd::NoGradGuard no_grad;
  const size_t prompt = ids.size();
  for (int64_t step = 0; step < new_tokens; ++step) {
    const int64_t T = static_cast<int64_t>(ids.size());
    const Tensor logits = model(Variable(Tensor::from_vector(ids, {1, T}))).data();
    const std::vector<float> last = logits.narrow(1, T - 1, 1).contiguous().to_vector<float>();
    ids.push_back(std::max_element(last.begin(), last.end()) - last.begin());
  }
  return std::vector<int64_t>(ids.begin() + static_cast<long>(prompt), ids.end());
}

}  // namespace

TEST_CASE("config.json: transformers v5's rope_parameters and v4's rope_theta/rope_scaling read the same", "[models]") {
  const DecoderConfig v5 = config_of(kLlamaV5);
  CHECK(v5.architecture == "llama");
  CHECK(v5.n_layer == 2);
  CHECK(v5.n_kv_head == 2);
  CHECK(v5.rope.theta == 500000.0);
  CHECK(v5.rope.scaling.type == "llama3");
  CHECK(v5.rope.scaling.original_max_positions == 32);
  CHECK(v5.eos_token_id == std::vector<int64_t>{2});
  const std::string v4 = replace(
      replace(kLlamaV5, R"("dtype": "float32")", R"("torch_dtype": "float32")"),
      R"("rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                      "original_max_position_embeddings": 32, "rope_theta": 500000.0, "rope_type": "llama3"})",
      R"("rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
         "original_max_position_embeddings": 32, "type": "llama3"})");
  const DecoderConfig from_v4 = config_of(v4);
  CHECK(from_v4.rope.theta == 500000.0);
  CHECK(from_v4.rope.scaling.type == "llama3");
  CHECK(from_v4.rope.scaling.factor == 8.0);
  // What Fathom writes reads back as the same model.
  const DecoderConfig again = config_of(hf_config_json(v5));
  CHECK(again.parameter_count() == v5.parameter_count());
  CHECK(again.rope.scaling.high_freq_factor == 4.0);
  CHECK(hf_config_json(again) == hf_config_json(v5));
  // Qwen2 always has q/k/v biases.
  std::string qwen2_json = replace(replace(kLlamaV5, R"("model_type": "llama")", R"("model_type": "qwen2")"),
                                   R"(["LlamaForCausalLM"])", R"(["Qwen2ForCausalLM"])");
  for (const char* llama_only : {R"("attention_bias": false,)", R"("mlp_bias": false,)", R"("pretraining_tp": 1,)"})
    qwen2_json = replace(qwen2_json, llama_only, "");
  const DecoderConfig qwen2 = config_of(qwen2_json);
  CHECK((qwen2.qkv_bias && !qwen2.o_bias && qwen2.sliding_window == 0));
  // Mistral: an absent sliding_window is transformers' default, 4096; null is none.
  std::string mistral_json = replace(replace(qwen2_json, R"("model_type": "qwen2")", R"("model_type": "mistral")"),
                                     R"(["Qwen2ForCausalLM"])", R"(["MistralForCausalLM"])");
  CHECK(config_of(mistral_json).sliding_window == 4096);
  CHECK(config_of(replace(mistral_json, R"("use_cache": true)", R"("sliding_window": null)")).sliding_window == 0);
}

TEST_CASE("config.json errors name the field and what is supported", "[models]") {
  using testing::error_of;
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"("model_type": "llama")", R"("model_type": "gemma")")); }),
             Catch::Contains("model_type \"gemma\" is not supported (supported: gpt2, llama, qwen2, mistral)"));
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"("mlp_bias": false)", R"("mlp_bais": false)")); }),
             Catch::Contains("the field \"mlp_bais\" is not supported for model_type llama (did you mean \"mlp_bias\"?)"));
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"("rope_type": "llama3")", R"("rope_type": "yarn")")); }),
             Catch::Contains("rope_type \"yarn\" is not supported (supported: default, linear, dynamic, llama3)"));
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"("hidden_act": "silu")", R"("hidden_act": "gelu")")); }),
             Catch::Contains("hidden_act \"gelu\" is not supported"));
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"("num_key_value_heads": 2)", R"("num_key_value_heads": 3)")); }),
             Catch::Contains("n_head (4) must be a multiple of n_kv_head (3)"));
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"("attention_dropout": 0.0)", R"("attention_dropout": 0.1)")); }),
             Catch::Contains("attention_dropout 0.1 is not supported"));
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"("use_cache": true)", R"("quantization_config": {})")); }),
             Catch::Contains("quantized weights (quantization_config) are not supported"));
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"("hidden_size": 64)", R"("hidden_size": "64")")); }),
             Catch::Contains("\"hidden_size\" must be an integer, got a string"));
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"("hidden_size": 64,)", "")); }),
             Catch::Contains("the field \"hidden_size\" is required"));
  CHECK_THAT(error_of([&] { config_of(R"({"vocab_size": 5})"); }), Catch::Contains("no \"model_type\""));
  const std::string qwen2 =
      replace(replace(replace(kLlamaV5, R"("model_type": "llama")", R"("model_type": "qwen2")"),
                      R"(["LlamaForCausalLM"])", R"(["Qwen2ForCausalLM"])"),
              R"("attention_bias": false,)", "");
  const std::string mixed = replace(replace(qwen2, R"("mlp_bias": false,)", R"("use_sliding_window": true, "sliding_window": 8,)"),
                                    R"("pretraining_tp": 1,)", R"("max_window_layers": 1,)");
  CHECK_THAT(error_of([&] { config_of(mixed); }),
             Catch::Contains("gives some layers a window and others none"));
  CHECK_THAT(error_of([&] { config_of(replace(kLlamaV5, R"(["LlamaForCausalLM"])", R"(["LlamaForSequenceClassification"])")); }),
             Catch::Contains("architectures names LlamaForSequenceClassification; Fathom reads LlamaForCausalLM"));
  CHECK_THAT(error_of([&] { read_hf_config(temp_dir("no_config")); }), Catch::Contains("no config.json in"));
}

TEST_CASE("a model folder round-trips, one file or shards with an index, in f32 and bf16; deferred init reads it",
          "[models]") {
  const DecoderConfig config = config_of(kLlamaV5);
  const Decoder source(config, 7);
  const Tensor ids = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {1, 6});
  const Tensor expected = const_cast<Decoder&>(source)(Variable(ids)).data();
  for (int64_t shard : {int64_t{1} << 30, int64_t{40'000}}) {
    INFO("max shard bytes " << shard);
    const std::string dir = temp_dir("roundtrip");
    const auto files = save_hf_model(config, source.state_dict(), dir, {DType::F32, shard});
    CHECK(files.size() == (shard > 1'000'000 ? 2u : 2u + HfWeights(dir).num_files()));
    CHECK(fs::exists(dir + (shard > 1'000'000 ? "/model.safetensors" : "/model.safetensors.index.json")));
    if (shard < 1'000'000) CHECK(HfWeights(dir).num_files() > 2);
    Decoder loaded(read_hf_config(dir), 99);
    load_hf_weights(loaded, dir);
    CHECK(testing::mismatch(loaded(Variable(ids)).data(), expected, 0, 0) == "");
    // Deferred: nothing is read until a parameter's value is asked for.
    std::unique_ptr<Decoder> deferred;
    {
      nn::DeferredInit scope;
      deferred = std::make_unique<Decoder>(read_hf_config(dir), 99);
    }
    load_hf_weights(*deferred, dir);
    for (const auto& [name, parameter] : deferred->named_parameters())
      CHECK(testing::mismatch(nn::initial_value(parameter, name), source.parameter(name).data(), 0, 0) == "");
  }
  // bf16: the stored values are the rounded weights; config.json says so.
  const std::string dir = temp_dir("bf16");
  save_hf_model(config, source.state_dict(), dir, {DType::BF16});
  CHECK(HfWeights(dir).info("model.norm.weight").dtype == DType::BF16);
  Decoder loaded(read_hf_config(dir), 99);
  load_hf_weights(loaded, dir);
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  CHECK(testing::mismatch(loaded.parameter(name).data(), source.parameter(name).data().to(DType::BF16).to(DType::F32),
                          0, 0) == "");
}

TEST_CASE("a GPT-2 folder in shards round-trips: GPT-2's names and Conv1D layout, an index, the same weights",
          "[models]") {
  const DecoderConfig config = DecoderConfig::preset("gpt2-tiny");
  const Decoder source(config, 7);
  const std::string dir = temp_dir("gpt2_shards");
  const std::vector<std::string> files = save_hf_model(config, source.state_dict(), dir, {DType::F32, 40'000});
  REQUIRE(files.back().ends_with("model.safetensors.index.json"));
  const HfWeights stored(dir);
  CHECK(stored.num_files() > 1);
  CHECK(stored.info("transformer.h.0.attn.c_attn.weight").shape == Shape{64, 192});  // Conv1D's [in, 3 x out]
  CHECK_FALSE(stored.contains("lm_head.weight"));  // tied
  Decoder loaded(read_hf_config(dir), 99);
  load_hf_weights(loaded, dir);
  for (const auto& [name, parameter] : source.named_parameters()) {
    INFO(name);
    CHECK(testing::mismatch(loaded.parameter(name).data(), parameter.data(), 0, 0) == "");
  }
}

TEST_CASE("a wrong model folder gets an error naming the tensor, file or shard", "[models]") {
  using testing::error_of;
  const DecoderConfig config = config_of(kLlamaV5);
  const Decoder source(config, 7);
  const std::string dir = temp_dir("bad_folder");
  Decoder model(config, 1);
  CHECK_THAT(error_of([&] { load_hf_weights(model, dir); }),
             Catch::Contains("no weights in " + dir + ": expected model.safetensors or model.safetensors.index.json"));
  // A shard missing from the folder.
  save_hf_model(config, source.state_dict(), dir, {DType::F32, 40'000});
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind("model-00002-of-", 0) == 0) fs::remove(entry.path());
  CHECK_THAT(error_of([&] { HfWeights{dir}; }),
             Catch::Contains("names the shard model-00002-of-") && Catch::Contains("which is not in " + dir));
  // Wrong shape, missing and unexpected tensors, an integer weight.
  auto weights = source.state_dict();
  const auto save_with = [&](nn::NamedTensors tensors) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    write_hf_config(config, dir + "/config.json");
    nn::save_safetensors(dir + "/model.safetensors", tensors);
  };
  auto shaped = weights;
  shaped[3].second = Tensor::zeros({3, 3});
  save_with(shaped);
  CHECK_THAT(error_of([&] { load_hf_weights(model, dir); }),
             Catch::Contains("\"" + weights[3].first + "\" has shape [3, 3] in " + dir + "/model.safetensors but the config gives"));
  auto fewer = weights;
  fewer.erase(fewer.begin() + 2);
  save_with(fewer);
  CHECK_THAT(error_of([&] { load_hf_weights(model, dir); }),
             Catch::Contains("1 of the model's tensors are missing: " + weights[2].first));
  auto more = weights;
  more.emplace_back("model.layers.2.mlp.up_proj.weight", Tensor::zeros({2}));
  save_with(more);
  CHECK_THAT(error_of([&] { load_hf_weights(model, dir); }),
             Catch::Contains("1 tensors the model does not have: model.layers.2.mlp.up_proj.weight"));
  auto integer = weights;
  integer[0].second = integer[0].second.to(DType::I32);
  save_with(integer);
  CHECK_THAT(error_of([&] { load_hf_weights(model, dir); }), Catch::Contains("holds i32 values; a weight must be"));
  // An untied model without lm_head.weight is missing it; a tied one is not.
  auto headless = weights;
  headless.pop_back();
  save_with(headless);
  CHECK_THAT(error_of([&] { load_hf_weights(model, dir); }), Catch::Contains("missing: lm_head.weight"));
}

TEST_CASE("transformers' Llama, Qwen2 and Mistral: Fathom's logits, loss, gradients and greedy tokens; the "
          "exported folder loads back in transformers",
          "[models][transformers]") {
  if (!transformers_available()) return;
  for (const std::string kind : {"llama", "qwen2", "mistral"}) {
    INFO(kind);
    const std::string dir = make_peer(kind);
    const nn::SafetensorsFile reference(dir + "/reference.safetensors");
    Decoder model(read_hf_config(dir), 1);
    CHECK(model.config().architecture == kind);
    load_hf_weights(model, dir);
    const Variable logits = check_logits_and_loss(model, reference);
    for (const auto& [name, parameter] : model.named_parameters()) {
      INFO(name);
      CHECK(testing::mismatch(parameter.grad(), reference.get("grad." + name), 1e-6, 1e-4) == "");
    }
    // Greedy tokens, by whole-prefix forwards and by the KV cache (fathom-generate's path).
    const std::vector<int64_t> expected = reference.get("generated").to_vector<int64_t>();
    CHECK(greedy(model, {5, 6, 7, 8}, 100) == expected);
    Generator gen(0);
    const Generated cached =
        generate(model, Tensor::from_vector<int64_t>({5, 6, 7, 8}, {1, 4}), {.max_new_tokens = 100, .temperature = 0},
                 gen);
    CHECK(cached.sequences.narrow(1, 4, 100).contiguous().to_vector<int64_t>() == expected);

    // Export and load back in transformers.
    const std::string exported = temp_dir("export_" + kind);
    save_hf_model(model.config(), model.state_dict(), exported);
    const std::string out = exported + "/logits.safetensors";
    REQUIRE(std::system(("python3 " + peer_script() + " logits " + exported + " " + out + " 2>/dev/null").c_str()) == 0);
    CHECK(testing::mismatch(nn::SafetensorsFile(out).get("logits"), logits.data(), 1e-5, 1e-5) == "");
    fs::remove_all(dir);
    fs::remove_all(exported);
  }
}

TEST_CASE("GPT-2 is a configuration of the decoder: GPT's weights through the adapter give GPT's logits, and "
          "the adapter writes GPT's file back",
          "[models]") {
  for (bool tied : {true, false}) {
    INFO((tied ? "tied" : "untied"));
    GPTConfig config = GPTConfig::preset("tiny");
    config.tied_embeddings = tied;
    GPT gpt(config, 3);
    const std::string dir = temp_dir("gpt2_adapter");
    save_gpt2_safetensors(gpt, dir + "/model.safetensors");
    Decoder decoder(gpt2_decoder_config(config), 99);
    load_gpt2_into_decoder(decoder, dir);
    const Tensor ids = Tensor::from_vector<int64_t>({1, 5, 9, 200, 3, 17, 42, 8}, {2, 4});
    CHECK(testing::mismatch(decoder(Variable(ids)).data(), gpt(Variable(ids)).data(), 1e-5, 1e-5) == "");
    // Back to GPT-2's names and layout: the same tensors the GPT wrote.
    const nn::SafetensorsFile file(dir + "/model.safetensors");
    nn::NamedTensors weights;
    for (const auto& [name, parameter] : decoder.named_parameters()) weights.emplace_back(name, parameter.data());
    const nn::NamedTensors written = gpt2_tensors(decoder.config(), weights);
    CHECK(written.size() == file.names().size());
    for (const auto& [name, tensor] : written) {
      INFO(name);
      CHECK(testing::mismatch(tensor, file.get(name), 0, 0) == "");
    }
  }
  using testing::error_of;
  GPTConfig wider = GPTConfig::preset("tiny");
  wider.n_embd = 128;
  GPT gpt(GPTConfig::preset("tiny"), 3);
  const std::string dir = temp_dir("gpt2_adapter_bad");
  save_gpt2_safetensors(gpt, dir + "/model.safetensors");
  Decoder decoder(gpt2_decoder_config(wider), 1);
  CHECK_THAT(error_of([&] { load_gpt2_into_decoder(decoder, dir); }),
             Catch::Contains("\"transformer.wte.weight\" gives model.embed_tokens.weight the shape [256, 64] but the "
                             "config gives [256, 128]"));
}

TEST_CASE("transformers' GPT-2 through the decoder: logits, loss, gradients, 100 greedy tokens, and the folder "
          "written back loads in GPT2LMHeadModel",
          "[models][transformers]") {
  if (!transformers_available()) return;
  const std::string dir = make_peer("gpt2");
  const nn::SafetensorsFile reference(dir + "/reference.safetensors");
  const ModelSpec spec = ModelSpec::from_folder(dir);
  REQUIRE(spec.architecture() == "gpt2");
  Decoder model(spec.decoder, 1);
  spec.load(model, dir);
  const Variable logits = check_logits_and_loss(model, reference);
  nn::NamedTensors grads;
  for (const auto& [name, parameter] : model.named_parameters()) grads.emplace_back(name, parameter.grad());
  for (const auto& [name, grad] : gpt2_tensors(model.config(), grads)) {
    INFO(name);
    CHECK(testing::mismatch(grad, reference.get("grad." + name), 1e-6, 1e-4) == "");
  }
  Generator gen(0);
  const Generated cached =
      generate(model, Tensor::from_vector<int64_t>({5, 6, 7, 8}, {1, 4}), {.max_new_tokens = 100, .temperature = 0}, gen);
  CHECK(cached.sequences.narrow(1, 4, 100).contiguous().to_vector<int64_t>() ==
        reference.get("generated").to_vector<int64_t>());
  // Written back as GPT-2's folder, as every program writes it.
  const std::string exported = temp_dir("export_gpt2");
  spec.save(model.state_dict(), exported);
  const std::string out = exported + "/logits.safetensors";
  REQUIRE(std::system(("python3 " + peer_script() + " logits " + exported + " " + out + " 2>/dev/null").c_str()) == 0);
  CHECK(testing::mismatch(nn::SafetensorsFile(out).get("logits"), logits.data(), 1e-5, 1e-5) == "");
}

TEST_CASE("what a config.json cannot say is refused on writing; GPT-2's reader refuses what GPT cannot compute",
          "[models]") {
  using testing::error_of;
  DecoderConfig llama = config_of(kLlamaV5);
  llama.sliding_window = 8;
  CHECK_THAT(error_of([&] { hf_config_json(llama); }), Catch::Contains("the llama config.json has no sliding window"));
  DecoderConfig qwen2 = config_of(kLlamaV5);
  qwen2.architecture = "qwen2";  // Qwen2 always has q/k/v biases
  CHECK_THAT(error_of([&] { hf_config_json(qwen2); }), Catch::Contains("cannot express these attention biases"));
  DecoderConfig partial = config_of(kLlamaV5);
  partial.rope.rotary_dim = 8;
  CHECK_THAT(error_of([&] { hf_config_json(partial); }), Catch::Contains("rotates the whole head"));
  DecoderConfig gpt_like = config_of(kLlamaV5);
  gpt_like.norm = Norm::LayerNorm;
  CHECK_THAT(error_of([&] { hf_config_json(gpt_like); }),
             Catch::Contains("describes RMSNorm, rotary positions and a gated SiLU MLP"));
  // A Qwen2 layer_types list that disagrees with the window settings.
  const std::string qwen2_json = R"({"model_type": "qwen2", "vocab_size": 256, "hidden_size": 64,
      "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4,
      "layer_types": ["full_attention", "sliding_attention"]})";
  CHECK_THAT(error_of([&] { config_of(qwen2_json); }), Catch::Contains("layer_types mixes attention types"));
  const auto gpt2 = [](const std::string& extra) {
    return ModelSpec::from_json(R"({"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 64)" + extra + "}",
                                "config.json");
  };
  CHECK(gpt2("").decoder.hidden_size == 64);
  CHECK(gpt2("").decoder.scaled_residual_init);
  DecoderConfig grouped = gpt2("").decoder;
  grouped.n_kv_head = 1;
  CHECK_THAT(error_of([&] { hf_config_json(grouped); }),
             Catch::Contains("a gpt2 config.json (GPT2Config) describes LayerNorm, learned positions"));
  CHECK_THAT(error_of([&] { gpt2(R"(, "n_inner": 100)"); }), Catch::Contains("n_inner 100 is not supported"));
  CHECK_THAT(error_of([&] { gpt2(R"(, "activation_function": "relu")"); }),
             Catch::Contains("activation_function \"relu\" is not supported"));
  CHECK_THAT(error_of([&] { gpt2(R"(, "n_emdb": 64)"); }),
             Catch::Contains("the field \"n_emdb\" is not supported for model_type gpt2 (did you mean \"n_embd\"?)"));
}
