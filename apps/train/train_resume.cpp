#include "apps/train/train_resume.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/json.h"
#include "core/json_writer.h"
#include "engine/checkpoint/reader.h"

namespace fathom::apps {
namespace {

constexpr const char* kClientKey = "fathom-train";

// The vocabulary follows the data, so it is not part of the shape a resume must agree on.
std::string shape_text(const models::ModelSpec& spec) { return spec.describe(/*with_vocab=*/false); }

std::optional<TrainRun> train_run_of(const std::string& client_state, const std::string& source) {
  const JsonValue state = parse_json(client_state, source);
  const JsonValue* run = state.is_object() ? state.find(kClientKey) : nullptr;
  if (!run) return std::nullopt;
  const JsonValue& model = run->at("model");
  TrainRun out;
  out.preset = run->at("preset").as_string();
  if (const JsonValue* dir = run->find("model_dir")) out.model_dir = dir->as_string();
  if (model.is_string()) {  // the model's config.json
    out.model = models::ModelSpec::from_json(model.as_string(), source + " (model)");
  } else {  // a GPT's sizes, as checkpoints before the architectures wrote them
    out.model.decoder = models::DecoderConfig::gpt2(model.at("n_layer").as_int64(), model.at("n_head").as_int64(),
                                                    model.at("n_embd").as_int64(), model.at("vocab_size").as_int64(),
                                                    model.at("block_size").as_int64());
  }
  out.data_path = run->at("data").as_string();
  out.val_data_path = run->at("val_data").as_string();
  out.steps = run->at("steps").as_int64();
  out.sequence_length = model.is_string() ? run->at("sequence_length").as_int64() : out.model.max_positions();
  if (const JsonValue* save_every = run->find("save_every")) out.save_every = save_every->as_int64();
  if (const JsonValue* format = run->find("data_format")) out.data_format = parse_data_format(format->as_string());
  return out;
}

}  // namespace

std::string train_run_client_state(const TrainRun& run) {
  JsonWriter w(JsonWriter::Layout::Compact);
  w.begin_object().key(kClientKey).begin_object();
  w.member("preset", run.preset).member("model_dir", run.model_dir);
  w.member("model", run.model.to_json()).member("sequence_length", static_cast<long long>(run.sequence_length));
  w.member("data", run.data_path)
      .member("val_data", run.val_data_path)
      .member("steps", static_cast<long long>(run.steps))
      .member("save_every", static_cast<long long>(run.save_every))
      .member("data_format", run.data_format == DataFormat::Text     ? "text"
                             : run.data_format == DataFormat::Tokens ? "tokens"
                                                                     : "auto");
  w.end_object().end_object();
  return w.str();
}

TrainOptions with_restart_resume(TrainOptions options, std::vector<std::string>* log) {
  const char* count = std::getenv("FATHOM_RESTART_COUNT");
  if (!count || std::string(count) == "0" || !options.resume_dir.empty()) return options;
  const std::filesystem::path latest = std::filesystem::path(options.out_dir) / "checkpoints" / "latest";
  if (std::filesystem::exists(latest)) {
    options.resume_dir = options.out_dir;
    if (log) log->push_back(std::string("restart ") + count + " (FATHOM_RESTART_COUNT): resuming " + options.out_dir);
  } else if (log) {
    log->push_back(std::string("restart ") + count + " (FATHOM_RESTART_COUNT): no checkpoint in " + options.out_dir +
                   "/checkpoints yet, so from the start (--save-every N keeps one)");
  }
  return options;
}

ResumePoint open_resume_point(const std::string& resume_dir, const std::string& tag) {
  ResumePoint point;
  point.dir = find_checkpoint_dir(resume_dir, tag);
  const CheckpointReader reader(point.dir, tag);
  point.tag = reader.tag();
  const JsonValue& index = reader.index();
  point.world_size = reader.world_size();
  point.global_steps = index.at("engine").at("global_steps").as_int64();
  point.config_json = index.at("config").as_string();
  point.run = train_run_of(index.at("client_state").as_string(), reader.index_path() + " (client_state)");
  point.tensor_size = reader.tensor_parallel_size();
  point.pipeline_size = reader.pipeline_parallel_size();
  point.parameter_names = reader.parameter_names();
  return point;
}

bool ResumePoint::legacy_gpt2() const {
  return std::find(parameter_names.begin(), parameter_names.end(), "transformer.wte.weight") != parameter_names.end();
}

std::string ResumePoint::layout() const {
  const int ranks = world_size * tensor_size * pipeline_size;
  std::string text = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
  if (tensor_size == 1 && pipeline_size == 1) return text;
  text += ": ";
  if (pipeline_size > 1) text += "pipeline " + std::to_string(pipeline_size) + " x ";
  if (tensor_size > 1) text += "tensor " + std::to_string(tensor_size) + " x ";
  return text + "data " + std::to_string(world_size);
}

TrainOptions resumed_options(const TrainOptions& given, const ResumePoint& point, std::vector<std::string>* log) {
  TrainOptions o = given;
  std::string taken;
  FATHOM_CHECK(!point.legacy_gpt2(), "--resume: the checkpoint ", point.dir, "/", point.tag,
               " holds a GPT-2 in the layout of Fathom before its one decoder (transformer.h.N.attn.c_attn), "
               "which fathom-train no longer builds; convert its weights with `fathom-export ", point.dir,
               " --out FOLDER` and continue from them with `fathom-train --model FOLDER` (the optimizer state "
               "starts afresh)");
  if (point.run) {
    const TrainRun& run = *point.run;
    if (given.model_flags_given()) {
      models::ModelSpec asked = run.model;
      if (given.preset_given || given.arch_given || !given.model_dir.empty()) asked = given.model_spec();
      else given.apply_sizes(asked);
      FATHOM_CHECK(shape_text(asked) == shape_text(run.model), "--resume: the checkpoint ", point.dir, "/", point.tag,
                   " holds ", shape_text(run.model), " (", run.model_dir.empty() ? "preset " + run.preset : run.model_dir,
                   "), but the flags ask for ", shape_text(asked),
                   "; drop --arch, --preset, --model and the size flags to continue it, or start a new run "
                   "(another --out, without --resume)");
    }
    o.arch = run.model.architecture(), o.preset = run.preset, o.model_dir = run.model_dir;
    o.n_layer = o.n_head = o.n_kv_head = o.n_embd = 0;
    o.vocab_size = run.model.vocab_size();
    if (given.block_size == 0) o.block_size = run.sequence_length;
    taken = "the model (" + shape_text(run.model) + ")";
    if (given.data_path.empty() && !run.data_path.empty()) {
      o.data_path = run.data_path;
      o.data_format = run.data_format;
      taken += ", --data " + run.data_path;
      if (given.val_data_path.empty() && !run.val_data_path.empty()) {
        o.val_data_path = run.val_data_path;
        taken += ", --val-data " + run.val_data_path;
      }
    }
    if (!given.steps_given) {
      o.steps = run.steps;
      taken += ", --steps " + std::to_string(run.steps);
    }
    if (!given.save_every_given && run.save_every > 0) {
      o.save_every = run.save_every;
      taken += ", --save-every " + std::to_string(run.save_every);
    }
  }
  if (log && !taken.empty())
    log->push_back("resuming " + point.dir + "/" + point.tag + " (step " + std::to_string(point.global_steps) + ", " +
                   point.layout() + "): took " + taken + " from it");
  return o;
}

Config resumed_config(const ResumePoint& point, int world, std::vector<std::string>* log) {
  Config config = Config::from_string(point.config_json, ConfigFormat::Json);
  BatchConfig& batch = config.batch;
  const int64_t global = batch.train_batch_size, accumulation = batch.gradient_accumulation_steps;
  FATHOM_CHECK(global % (accumulation * world) == 0, "--resume: the checkpoint's global batch of ", global,
               " samples in ", accumulation, accumulation == 1 ? " micro-step" : " micro-steps",
               " does not divide over ", world, " ranks; run at a world size that divides ", global / accumulation,
               ", or pass a --config with batch sizes for ", world, " ranks");
  batch = BatchConfig{.train_batch_size = global, .gradient_accumulation_steps = accumulation};
  config.resolve_batch(world);
  if (log)
    log->push_back("config from the checkpoint: train_batch_size " + std::to_string(global) + " = " +
                   std::to_string(config.batch.train_micro_batch_size_per_gpu) + " per rank x " +
                   std::to_string(accumulation) + " accumulation x " + std::to_string(world) +
                   (world == 1 ? " rank" : " ranks") + "; its schedule and seed as they were");
  return config;
}

}  // namespace fathom::apps
