// Checkpoints: bit-identical resume at the same world size for ZeRO stages 0-3 (and fp16 loss
// scaling), resharding to and from one process at another stage, and every bad-file case.
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/checkpoint/layout.h"
#include "engine/checkpoint/reader.h"
#include "engine/initialize.h"
#include "engine/data/token_dataset.h"
#include "models/decoder.h"
#include "mpi_test_util.h"
#include "nn/loss.h"
#include "test_util.h"
#include "zero_partitioning.h"

using namespace fathom;
using fathom::testing::error_of;
using fathom::testing::runtime;
namespace fs = std::filesystem;

namespace {
std::shared_ptr<TokenDataset> tokens(int samples = 64) {
  std::vector<uint16_t> t;
  for (int i = 0; i < samples * 16 + 1; ++i) t.push_back(static_cast<uint16_t>((i * 37 + i / 7 + i * i % 13) % 61));
  return std::make_shared<TokenDataset>(TokenDataset::from_tokens(t, 16, 64));
}

struct Job {
  std::shared_ptr<models::Decoder> model;
  Initialized init;
};

Job make_job(int stage, bool fp16, std::shared_ptr<parallel::Communicator> group, int global_batch = 12,
             int samples = 64) {
  models::DecoderConfig c = models::DecoderConfig::gpt2(/*n_layer=*/2, /*n_head=*/2, /*width=*/30,
                                                        /*vocab_size=*/61, /*positions=*/16);
  c.dropout = 0.1;
  c.qkv_bias = c.o_bias = c.mlp_bias = c.norm_bias = false;
  Job job;
  job.model = std::make_shared<models::Decoder>(c, 5);
  const std::string config = detail::concat(
      R"({"train_batch_size": )", global_batch, R"(, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}},
          "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3, "warmup_num_steps": 5}},
          "gradient_clipping": 1.0, "seed": 3, "fp16": {"enabled": )", fp16 ? "true" : "false",
      R"(, "initial_scale_power": 24, "loss_scale_window": 2}, "zero_optimization": {"stage": )", stage,
      R"(, "stage3_param_persistence_threshold": 0, "reduce_bucket_size": 3000}})");
  job.init = initialize(Config::from_string(config), job.model, nullptr, tokens(samples), std::move(group));
  return job;
}

std::vector<double> run_steps(Job& job, int steps) {
  std::vector<double> losses;
  Engine& engine = *job.init.engine;
  const int64_t target = engine.global_steps() + steps;
  while (engine.global_steps() < target)
    for (const Batch& batch : *job.init.loader) {
      const autograd::Variable logits = engine(autograd::Variable(batch.inputs), batch.sample_index);
      engine.backward(nn::cross_entropy(logits, batch.targets, batch.loss_normaliser));
      engine.step();
      if (batch.micro_step + 1 == engine.options().gradient_accumulation_steps)
        losses.push_back(engine.last_report().loss);
      if (engine.global_steps() >= target) break;
    }
  return losses;
}

std::vector<double> weights(Job& job) {
  std::vector<double> out;
  for (const auto& [name, tensor] : job.init.engine->consolidated_state_dict())
    for (double v : tensor.to_vector<double>()) out.push_back(v);
  return out;
}

// `values` on the group's rank 0, everywhere in the group (others pass anything of size n).
std::vector<double> broadcast_from_rank0(std::vector<double> values, size_t n,
                                          const std::shared_ptr<parallel::Communicator>& group) {
  if (values.size() != n) values.assign(n, 0.0);
  Tensor t = Tensor::from_vector(values, {static_cast<int64_t>(n)});
  group->broadcast(t, 0);
  return t.to_vector<double>();
}

// A folder shared by the ranks of one job (rank 0 names it, everyone gets it).
std::string shared_dir(parallel::Communicator& group, const std::string& what) {
  Tensor pid = Tensor::full({1}, static_cast<double>(::getpid()), DType::I64);
  group.broadcast(pid, 0);
  return (fs::temp_directory_path() / detail::concat("fathom_ckpt_", pid.to_vector<int64_t>()[0], "_", what)).string();
}
}  // namespace

TEST_CASE("resume is bit-identical at the same world size, ZeRO stages 0-3 and fp16", "[checkpoint]") {
  const auto& world = runtime().world_ptr();
  for (int stage : {0, 1, 2, 3})
    for (bool fp16 : {false, true}) {
      INFO("stage " << stage << (fp16 ? ", fp16" : ", f32") << ", " << world->size() << " ranks");
      const std::string dir = shared_dir(*world, detail::concat("resume_", stage, fp16));
      Job straight = make_job(stage, fp16, world);
      const std::vector<double> first = run_steps(straight, 3);
      straight.init.engine->save_checkpoint(dir, "", R"({"note": "three steps"})");
      const std::vector<double> rest = run_steps(straight, 3);

      Job resumed = make_job(stage, fp16, world);
      CHECK(resumed.init.engine->load_checkpoint(dir) == R"({"note": "three steps"})");
      CHECK(resumed.init.engine->global_steps() == 3);
      // The config travels with the state.
      const CheckpointReader reader(dir, "");
      CHECK(parse_json(reader.index().at("config").as_string()).at("zero_optimization").at("stage").as_int64() ==
            stage);
      const std::vector<double> resumed_rest = run_steps(resumed, 3);
      if (stage == 3) {
        fathom::testing::require_stage3_partitioned(*straight.init.engine);
        fathom::testing::require_stage3_partitioned(*resumed.init.engine);
      }
      CHECK(resumed_rest == rest);                       // bit for bit
      CHECK(weights(resumed) == weights(straight));
      if (fp16) CHECK(resumed.init.engine->loss_scale() == straight.init.engine->loss_scale());
      world->barrier();
      if (world->rank() == 0) fs::remove_all(dir);
    }
}

TEST_CASE("a checkpoint reshards: this world size <-> one process, across ZeRO stages", "[checkpoint]") {
  const auto& world = runtime().world_ptr();
  const int n = world->size();
  struct Move { int from_stage, to_stage; };
  for (const Move& move : {Move{2, 3}, Move{3, 0}, Move{1, 2}, Move{0, 3}}) {
    INFO("stage " << move.from_stage << " at " << n << " ranks -> stage " << move.to_stage << " at 1 process, and back");
    const std::string dir = shared_dir(*world, detail::concat("reshard_", move.from_stage, move.to_stage));
    Job straight = make_job(move.from_stage, false, world);
    run_steps(straight, 3);
    straight.init.engine->save_checkpoint(dir);
    const std::vector<double> rest = run_steps(straight, 3);
    const std::vector<double> final_weights = weights(straight);

    // N -> 1: every rank loads the checkpoint alone, at another stage, and continues.
    Job alone = make_job(move.to_stage, false, nullptr);
    alone.init.engine->load_checkpoint(dir);
    const std::vector<double> alone_rest = run_steps(alone, 3);
    if (move.from_stage == 3) fathom::testing::require_stage3_partitioned(*straight.init.engine);
    if (move.to_stage == 3) fathom::testing::require_stage3_partitioned(*alone.init.engine);
    REQUIRE(alone_rest.size() == rest.size());
    for (size_t i = 0; i < rest.size(); ++i) CHECK(std::fabs(alone_rest[i] - rest[i]) <= 1e-6 * std::fabs(rest[i]));
    CHECK(fathom::testing::mismatch(weights(alone), final_weights, 1e-7, 1e-5) == "");

    // 1 -> N: rank 0 saves alone at stage to_stage; all ranks load at from_stage and continue.
    const std::string single_dir = dir + "_single";
    if (world->rank() == 0) alone.init.engine->save_checkpoint(single_dir, "from_one");
    world->barrier();
    Job back = make_job(move.from_stage, false, world);
    back.init.engine->load_checkpoint(single_dir, "from_one");
    CHECK(back.init.engine->global_steps() == 6);
    CHECK(fathom::testing::mismatch(weights(back), weights(alone), 0, 0) == "");
    run_steps(back, 1);  // training continues from the loaded optimizer state
    if (move.from_stage == 3) fathom::testing::require_stage3_partitioned(*back.init.engine);
    world->barrier();
    if (world->rank() == 0) fs::remove_all(dir), fs::remove_all(single_dir);
  }
}

TEST_CASE("bad checkpoints are errors naming the file and the tensor", "[checkpoint]") {
  // One process, a folder of this rank's own.
  const std::string dir = (fs::temp_directory_path() / detail::concat("fathom_ckpt_bad_", ::getpid(), "_",
                                                                       runtime().rank())).string();
  fs::remove_all(dir);
  Job job = make_job(2, false, nullptr);
  run_steps(job, 2);
  CHECK(error_of([&] { job.init.engine->load_checkpoint(dir); }) ==
        "load_checkpoint: no checkpoint in " + dir + " (" + dir + "/latest does not exist); pass a tag or save one first");
  job.init.engine->save_checkpoint(dir, "good");
  CHECK(error_of([&] { job.init.engine->save_checkpoint(dir, "x", "{not json"); }).find("checkpoint client_state") !=
        std::string::npos);
  // Another model: a different width.
  {
    auto other = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"));
    Initialized init = initialize(Config::from_string(R"({"train_batch_size": 2,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})"), other);
    CHECK(error_of([&] { init.engine->load_checkpoint(dir); }).find("it was saved from another model") !=
          std::string::npos);
  }
  // The index lists each rank's files with their checksums.
  {
    CheckpointReader reader(dir, "good");
    const auto& states = reader.index().at("shards").as_array().at(0).at("states");
    CHECK(states.at("param").at("file").as_string() == "rank_00000.param.safetensors");
    CHECK(states.at("optim.exp_avg").at("file").as_string() == "rank_00000.optim.safetensors");
    CHECK(states.at("param").at("checksum").as_string().size() == 16);
  }
  const std::string file = dir + "/good/rank_00000.param.safetensors";
  // A truncated shard (a copy, restored after): the error names the file.
  fs::copy_file(file, file + ".bak");
  fs::resize_file(file, fs::file_size(file) / 2);
  CHECK(error_of([&] { job.init.engine->load_checkpoint(dir); }).find(file) != std::string::npos);
  fs::remove(file);
  fs::rename(file + ".bak", file);
  // A corrupt shard: flip a byte in the data section.
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-5, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  CHECK(error_of([&] { job.init.engine->load_checkpoint(dir); }).find("fails its checksum") != std::string::npos);
  // A missing rank file.
  fs::remove(file);
  CHECK(error_of([&] { job.init.engine->load_checkpoint(dir); }) ==
        "checkpoint " + dir + "/good: rank_00000.param.safetensors is missing (the checkpoint was saved by a job of 1 "
        "ranks); copy the whole folder");
  // An index from another format version (or another checksum algorithm) is refused by name.
  const std::string index_path = dir + "/good/index.json";
  const auto rewrite_index = [&](const std::string& from, const std::string& to) {
    std::ifstream in(index_path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    text.replace(text.find(from), from.size(), to);
    std::ofstream(index_path, std::ios::trunc) << text;
  };
  rewrite_index("\"checksum\": \"xxh64\"", "\"checksum\": \"fnv1a\"");
  CHECK(error_of([&] { job.init.engine->load_checkpoint(dir); }).find("checksum algorithm \"fnv1a\", expected \"xxh64\"") !=
        std::string::npos);
  rewrite_index("fathom-checkpoint-2", "fathom-checkpoint-1");
  CHECK(error_of([&] { job.init.engine->load_checkpoint(dir); }).find("it was written by another version of Fathom") !=
        std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("export: the checkpoint's consolidated weights equal the gathered model", "[checkpoint]") {
  const auto& world = runtime().world_ptr();
  for (int stage : {0, 3}) {
    const std::string dir = shared_dir(*world, detail::concat("export_", stage));
    Job job = make_job(stage, false, world);
    run_steps(job, 2);
    if (stage == 3) fathom::testing::require_stage3_partitioned(*job.init.engine);
    job.init.engine->save_checkpoint(dir);
    const std::vector<double> expected = weights(job);
    // What fathom-export does: read the flat state back and cut it into the named tensors.
    CheckpointReader reader(dir, "");
    Tensor flat = Tensor::empty({reader.parameters()}, DType::F32);
    reader.read("param", flat, {0, reader.parameters()});
    CHECK(reader.index().at("tensors").as_array().size() == job.model->named_parameters().size());
    CHECK(fathom::testing::mismatch(flat.to_vector<double>(), expected, 0, 0) == "");
    world->barrier();
    if (world->rank() == 0) fs::remove_all(dir);
  }
}

TEST_CASE("N -> M resharding between multi-rank jobs: (4, 2), (3, 4), (1, 3)", "[checkpoint]") {
  const auto& world = runtime().world_ptr();
  if (world->size() != 4) return;  // the sub-jobs below are cut from a 4-rank job
  const int rank = world->rank();
  const auto close = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::fabs(a[i] - b[i]) > 1e-6 * std::fabs(b[i])) return false;
    return true;
  };

  // (4, 2): saved by 4 ranks at stage 2; each half of the job loads it as a 2-rank job at stage 3.
  {
    const std::string dir = shared_dir(*world, "four_to_two");
    Job straight = make_job(2, false, world);
    run_steps(straight, 3);
    straight.init.engine->save_checkpoint(dir);
    const std::vector<double> rest = run_steps(straight, 3);
    const std::vector<double> final_weights = weights(straight);
    auto half = world->split(rank / 2, rank, "half");
    Job two = make_job(3, false, half);
    two.init.engine->load_checkpoint(dir);
    CHECK(close(run_steps(two, 3), rest));
    fathom::testing::require_stage3_partitioned(*two.init.engine);
    CHECK(fathom::testing::mismatch(weights(two), final_weights, 1e-7, 1e-5) == "");
    world->barrier();
    if (rank == 0) fs::remove_all(dir);
  }
  // (3, 4): saved by ranks 0-2 as a 3-rank job at stage 1; the whole job loads it at stage 0.
  // (1, 3): saved by rank 0 alone at stage 0; ranks 0-2 load it as a 3-rank job at stage 3.
  {
    const std::string dir = shared_dir(*world, "three_to_four");
    auto three = world->split(rank < 3 ? 0 : 1, rank, "three");
    std::vector<double> rest;
    if (rank < 3) {
      Job straight = make_job(1, false, three);
      run_steps(straight, 3);
      straight.init.engine->save_checkpoint(dir);
      rest = run_steps(straight, 3);
    }
    rest = broadcast_from_rank0(rest, 3, world);
    Job four = make_job(0, false, world);
    four.init.engine->load_checkpoint(dir);
    CHECK(close(run_steps(four, 3), rest));

    const std::string single = dir + "_single";
    std::vector<double> alone_weights;
    if (rank == 0) {
      Job alone = make_job(0, false, nullptr);
      run_steps(alone, 2);
      alone.init.engine->save_checkpoint(single, "one");
      alone_weights = weights(alone);
    }
    world->barrier();
    if (rank < 3) {
      Job loaded = make_job(3, false, three);
      loaded.init.engine->load_checkpoint(single, "one");
      const std::vector<double> got = weights(loaded);
      const std::vector<double> expected = broadcast_from_rank0(alone_weights, got.size(), three);
      CHECK(fathom::testing::mismatch(got, expected, 0, 0) == "");
      run_steps(loaded, 1);
      fathom::testing::require_stage3_partitioned(*loaded.init.engine);
    }
    world->barrier();
    if (rank == 0) fs::remove_all(dir), fs::remove_all(single);
  }
}

TEST_CASE("checkpoint file names carry every parallel coordinate that makes a rank's state distinct", "[checkpoint]") {
  using parallel::Topology;
  CHECK(checkpoint_file_name(2, "optim") == "rank_00002.optim.safetensors");  // data parallelism: the format as before
  CHECK(checkpoint_file_name({0, 2, 0}, Topology(4), "param") == "rank_00002.param.safetensors");
  CHECK(checkpoint_file_name({0, 1, 1}, Topology(4, 1, 2), "param") == "rank_00001.tp01.param.safetensors");
  CHECK(checkpoint_file_name({3, 0, 1}, Topology(16, 4, 2), "master") == "rank_00000.tp01.pp03.master.safetensors");
  // Every rank of a pipe 2 x data 2 x tensor 2 job writes its own file.
  const Topology grid(8, 2, 2);
  std::set<std::string> names;
  for (int rank = 0; rank < 8; ++rank) names.insert(checkpoint_file_name(grid.coord_of(rank), grid, "param"));
  CHECK(names.size() == 8);
}

TEST_CASE("checkpoint.tag_validation: different tags on different ranks warn, or fail on every rank", "[checkpoint]") {
  const auto& world = runtime().world_ptr();
  if (world->size() == 1) return;
  const std::string dir = (std::filesystem::temp_directory_path() / "fathom_tag_validation").string();
  const std::string config = R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
      "checkpoint": {"tag_validation": "Fail"}})";
  auto model = std::make_shared<models::Decoder>(models::DecoderConfig::preset("gpt2-tiny"), 5);
  const Initialized init = initialize(Config::from_string(config), model, nullptr, tokens(), world);
  const std::string tag = "rank" + std::to_string(world->rank());  // rank-specific: refused on every rank
  CHECK(testing::error_of([&] { init.engine->save_checkpoint(dir, tag); }) ==
        "save_checkpoint: the tag \"" + tag + "\" of rank " + std::to_string(world->rank()) +
            " is not the tag of every rank; pass one tag on every rank (a tag with rank-specific text does not load "
            "at another world size) (checkpoint.tag_validation is \"Fail\")");
  CHECK_FALSE(std::filesystem::exists(dir + "/" + tag + ".tmp"));  // refused before anything is written
  // One tag on every rank saves.
  init.engine->save_checkpoint(dir, "same");
  CHECK(std::filesystem::exists(dir + "/same/index.json"));
  CHECK(Config::from_string(config).checkpoint_tag_validation == "Fail");
  CHECK(Config::from_string(R"({"train_batch_size": 2, "checkpoint": {"tag_validation": "ignore"}})")
            .checkpoint_tag_validation == "Ignore");
}

TEST_CASE("a `latest` written by hand with a newline loads; an empty one says so", "[checkpoint]") {
  const auto& world = runtime().world_ptr();
  const std::string dir = (std::filesystem::temp_directory_path() / "fathom_latest_by_hand").string();
  Job job = make_job(0, false, world);
  run_steps(job, 1);
  job.init.engine->save_checkpoint(dir, "first");
  if (world->rank() == 0) std::ofstream(dir + "/latest") << "  first\n";  // as `echo first > latest` writes it
  world->barrier();
  CHECK(CheckpointReader(dir, "").tag() == "first");
  world->barrier();
  if (world->rank() == 0) std::ofstream(dir + "/latest") << "\n";
  world->barrier();
  CHECK(testing::error_of([&] { CheckpointReader(dir, ""); }) ==
        "load_checkpoint: " + dir + "/latest is empty; write the tag to load into it, or pass the tag");
  world->barrier();
}

TEST_CASE("a save that fails (a full disk) leaves no .tmp folder, and the previous tag and latest as they were", "[checkpoint]") {
  const auto& world = runtime().world_ptr();
  if (world->size() > 1) return;  // one process: in a job the error ends every rank
  const std::string dir = (std::filesystem::temp_directory_path() / "fathom_failed_save").string();
  std::filesystem::remove_all(dir);
  Job job = make_job(0, false, world);
  run_steps(job, 1);
  job.init.engine->save_checkpoint(dir, "good");
  run_steps(job, 1);
  setenv("FATHOM_TEST_CRASH_DURING_SAVE", "shard-error", 1);
  const std::string message = error_of([&] { job.init.engine->save_checkpoint(dir, "bad"); });
  unsetenv("FATHOM_TEST_CRASH_DURING_SAVE");
  CHECK(message.find("checkpoint: writing a shard failed") == 0);
  CHECK_FALSE(std::filesystem::exists(dir + "/bad.tmp"));
  CHECK_FALSE(std::filesystem::exists(dir + "/bad"));
  CHECK(CheckpointReader(dir, "").tag() == "good");
  job.init.engine->save_checkpoint(dir, "bad");  // the next save, with the disk freed, succeeds
  CHECK(CheckpointReader(dir, "").tag() == "bad");
}

TEST_CASE("resume with another dataset is refused; with another global batch it continues at the same sample", "[checkpoint]") {
  const auto& world = runtime().world_ptr();
  if (world->size() > 1) return;  // the batch sizes below are for one process
  const std::string dir = (std::filesystem::temp_directory_path() / "fathom_resume_consistency").string();
  std::filesystem::remove_all(dir);
  Job saved = make_job(0, false, world, 12);
  run_steps(saved, 2);  // 24 samples of epoch 0
  saved.init.engine->save_checkpoint(dir, "two");

  Job smaller_batch = make_job(0, false, world, 8);
  smaller_batch.init.engine->load_checkpoint(dir, "two");
  CHECK(smaller_batch.init.loader->state() == DataLoaderState{0, 3});  // sample 24 = step 3 of batch 8

  Job odd_batch = make_job(0, false, world, 16);
  CHECK(error_of([&] { odd_batch.init.engine->load_checkpoint(dir, "two"); }) ==
        "load_checkpoint: the checkpoint stopped after 24 samples of epoch 0 with a global batch of 12; a global batch "
        "of 16 cannot start there (24 is not a multiple of 16): resume with a global batch that divides 24");

  Job other_data = make_job(0, false, world, 12, 48);
  CHECK(error_of([&] { other_data.init.engine->load_checkpoint(dir, "two"); }).find(
            "load_checkpoint: the checkpoint was trained on a dataset of 64 samples, this run's has 48; its data "
            "position (epoch 0, step 2) would mean other samples") == 0);
}
