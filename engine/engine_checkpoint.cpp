// Engine::save_checkpoint / load_checkpoint. Layout on disk (docs/checkpoints.md):
//
//   <dir>/latest                       the newest tag (replaced last, atomically)
//   <dir>/<tag>/index.json             everything that is not per-element: world size, stage,
//                                      dtype, the tensor table, the shard table (each saved
//                                      rank's flat range, files and XXH64 checksums),
//                                      optimizer scalars, schedule, loss scaler, counters,
//                                      data loader position, config, client state
//   <dir>/<tag>/rank_<r>[.tp<t>].<kind>.safetensors
//                                      data rank r's range of each per-element state of one kind:
//                                      param ("param"), master ("master"), optim
//                                      ("optim.exp_avg", ...); of tensor-parallel rank t's
//                                      partition in a tensor-parallel job
//                                      (engine/checkpoint/partitions.h)
//
// A tag is written into <tag>.tmp, fsynced and renamed, so a run killed while saving leaves the
// previous tag (and `latest`) intact.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/logging.h"
#include "engine/checkpoint/layout.h"
#include "engine/checkpoint/partitions.h"
#include "engine/checkpoint/reader.h"
#include "engine/checkpoint/resharding.h"
#include "engine/engine.h"
#include "core/json.h"
#include "core/json_writer.h"
#include "nn/safetensors.h"
#include "parallel/rank_agreement.h"

namespace fathom {
namespace fs = std::filesystem;
using TensorSlot = zero::FlatSlot;
using zero::Range;

namespace {
constexpr const char* kRankLocalKind = "optim_local";


// Fault injection for the crash-safety tests: FATHOM_TEST_CRASH_DURING_SAVE=shard kills the run
// between two shard writes, =index after the index is written but before the tag is renamed;
// =shard-error fails the shard write with an error the process survives, as a full disk does.
void crash_here_for_tests(const char* point, bool on_this_rank) {
  const char* crash = std::getenv("FATHOM_TEST_CRASH_DURING_SAVE");
  if (!crash || !on_this_rank) return;
  if (std::string(crash) == point) std::abort();
  if (std::string(crash) == std::string(point) + "-error")
    FATHOM_FAIL("checkpoint: writing a shard failed (injected by FATHOM_TEST_CRASH_DURING_SAVE=", crash, ")");
}

// The saved data position in this loader's steps. Another dataset would make the position mean
// other samples: an error. Another global batch continues at the same sample of the epoch when
// that sample starts a step of the new batch (and says so); otherwise an error with the numbers.
DataLoaderState resumed_position(const JsonValue& saved, const DataLoader& loader) {
  DataLoaderState position{saved.at("epoch").as_int64(), saved.at("step").as_int64()};
  const JsonValue* samples = saved.find("samples");
  const JsonValue* batch = saved.find("global_batch");
  if (!samples || !batch) return position;  // a checkpoint from before they were recorded
  const int64_t dataset = loader.dataset().size(), then = batch->as_int64(), now = loader.global_batch_size();
  FATHOM_CHECK(samples->as_int64() == dataset, "load_checkpoint: the checkpoint was trained on a dataset of ",
               samples->as_int64(), " samples, this run's has ", dataset, "; its data position (epoch ",
               position.epoch, ", step ", position.step, ") would mean other samples: resume with the same data (and "
               "block size), or start a new run from the weights alone (fathom-export, then --init)");
  if (then == now) return position;
  const int64_t consumed = position.step * then;  // samples of the epoch already trained on
  FATHOM_CHECK(consumed % now == 0, "load_checkpoint: the checkpoint stopped after ", consumed, " samples of epoch ",
               position.epoch, " with a global batch of ", then, "; a global batch of ", now, " cannot start there (",
               consumed, " is not a multiple of ", now, "): resume with a global batch that divides ", consumed);
  FATHOM_LOG(Warning, detail::concat("load_checkpoint: the global batch changed from ", then, " to ", now,
                                     "; continuing at sample ", consumed, " of epoch ", position.epoch, " (step ",
                                     consumed / now, " of the new batch)"));
  position.step = consumed / now;
  return position;
}

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    FATHOM_CHECK(out, "checkpoint: cannot write ", tmp.string());
    out << text;
    out.flush();
    FATHOM_CHECK(out, "checkpoint: writing ", tmp.string(), " failed (disk full?)");
  }
  fsync_path(tmp);
  fs::rename(tmp, path);
  fsync_path(path.parent_path());
}

// checkpoint.tag_validation, as DeepSpeed checks it: every rank of the group must save under the
// same tag (a tag with rank-specific text would not load at another world size). Collective.
void validate_tag(parallel::Communicator& group, const std::string& tag, EngineOptions::TagValidation mode) {
  if (mode == EngineOptions::TagValidation::Ignore || parallel::same_on_every_rank(group, tag)) return;
  const std::string message = "save_checkpoint: the tag \"" + tag + "\" of rank " + std::to_string(group.rank()) +
                              " is not the tag of every rank; pass one tag on every rank (a tag with rank-specific "
                              "text does not load at another world size)";
  FATHOM_CHECK(mode != EngineOptions::TagValidation::Fail, message, " (checkpoint.tag_validation is \"Fail\")");
  FATHOM_LOG(Warning, message);
}

// Every rank's checksum of each state in `states` (the same list on every rank), gathered on
// all ranks as [rank][state] = {saved (0/1), checksum bits}.
Tensor gathered_checksums(parallel::Communicator* group, const std::map<std::string, uint64_t>& checksums,
                          const std::vector<std::string>& states) {
  const int64_t count = static_cast<int64_t>(states.size());
  Tensor mine = Tensor::zeros({count, 2}, DType::I64);
  int64_t* row = mine.data<int64_t>();
  for (int64_t i = 0; i < count; ++i)
    if (const auto found = checksums.find(states[i]); found != checksums.end()) {
      row[2 * i] = 1;
      row[2 * i + 1] = static_cast<int64_t>(found->second);
    }
  if (!group) return mine.view({1, count, 2});
  Tensor all = Tensor::empty({group->size(), count, 2}, DType::I64);
  group->all_gather(mine.view({-1}), all.view({-1}));
  return all;
}

// index.json's "shards": per partition and saved data rank its flat range and, per state, file
// and checksum. `sums` is [partition][data rank][state]; partition p is tensor rank p % tensor_size
// of pipeline stage p / tensor_size.
void write_shard_table(JsonWriter& w, const Tensor& sums, const std::vector<std::string>& states,
                       const std::vector<Range>& partitions, int tensor_size, int world, int stage,
                       const std::function<std::string(int, int, int, const std::string&)>& file_of) {
  const int64_t* at = sums.data<int64_t>();
  w.begin_array();
  for (size_t p = 0; p < partitions.size(); ++p)
    for (int r = 0; r < world; ++r) {
      const int pipe = static_cast<int>(p) / tensor_size, tensor = static_cast<int>(p) % tensor_size;
      const Range local = checkpoint_saved_range(partitions[p].size(), world, r, stage);
      const Range range{partitions[p].begin + local.begin, partitions[p].begin + local.end};
      w.begin_object(JsonWriter::Layout::Inline).member("rank", r).member("tensor_rank", tensor);
      if (pipe > 0) w.member("pipeline_stage", pipe);
      w.member("begin", range.begin).member("end", range.end);
      w.key("states").begin_object();
      for (size_t i = 0; i < states.size(); ++i, at += 2) {
        if (at[0] == 0) continue;
        w.key(states[i]).begin_object();
        w.member("file", file_of(pipe, tensor, r, checkpoint_state_kind(states[i])));
        w.member("checksum", checksum_hex(static_cast<uint64_t>(at[1]))).end_object();
      }
      w.end_object().end_object();
    }
  w.end_array();
}
}  // namespace

void Engine::save_checkpoint(const std::string& dir, std::string tag, const std::string& client_state) {
  parse_json(client_state, "checkpoint client_state");  // must be JSON
  FATHOM_CHECK(optimizer() != nullptr, "save_checkpoint: this engine has no optimizer (it evaluates only); "
               "save its model with consolidated_state_dict() instead");
  if (tag.empty()) tag = "global_step" + std::to_string(global_steps_);
  FATHOM_CHECK(tag.find('/') == std::string::npos && tag != "latest" && !tag.empty(),
               "save_checkpoint: tag \"", tag, "\" must be a plain folder name (no '/', not \"latest\")");
  const parallel::ProcessGroups& groups = state_->groups();
  parallel::Communicator* group = &state_->data_group();
  parallel::Communicator& tensor_group = groups.tensor();
  parallel::Communicator& pipeline_group = groups.pipeline();
  parallel::Communicator& job = *groups.world_ptr();
  const int rank = group->rank(), world = group->size();
  const bool writes_index = job.rank() == 0;
  const int stage = state_->stage();
  const zero::FlatStateView& view = state_->flat_view();
  const std::vector<TensorSlot> slots = view.flat_slots();
  const std::string signature = model_signature(slots, state_->placements());
  FATHOM_CHECK(parallel::same_on_every_rank(tensor_group, signature), "save_checkpoint: the tensor-parallel ranks hold "
               "different models (parameter names, unsplit shapes or splits differ); build the same model on every rank");
  const std::vector<SavedTensor> table =
      pipeline_table(pipeline_group, partition_table(slots, state_->placements(), tensor_group.size()));
  const std::vector<Range> partitions = partition_ranges(table, pipeline_group.size(), tensor_group.size());
  const int64_t numel = partitions[pipeline_group.rank() * tensor_group.size() + tensor_group.rank()].size();
  const Range mine = checkpoint_saved_range(numel, world, rank, stage);
  const DType param_dtype = view.parameter_dtype();
  const bool has_master = state_->keeps_masters();
  const fs::path final_dir = fs::path(dir) / tag, tmp_dir = fs::path(dir) / (tag + ".tmp");
  // The file of one kind of state of a partition (pipeline stage, tensor rank) at a data rank.
  const auto file_of = [&](int pipeline_stage, int tensor_rank, int data_rank, const std::string& kind) {
    return checkpoint_file_name({pipeline_stage, data_rank, tensor_rank}, groups.topology(), kind);
  };
  const auto my_file = [&](const std::string& kind) {
    return file_of(pipeline_group.rank(), tensor_group.rank(), rank, kind);
  };

  validate_tag(job, tag, options_.tag_validation);

  if (writes_index) {
    fs::create_directories(dir);
    fs::remove_all(tmp_dir);  // a previous attempt's leftovers
    fs::create_directories(tmp_dir);
  }
  job.barrier();

  // This rank's range of every per-element state, read a part at a time as its file is written
  // (states in swap files are never whole in memory) and checksummed on the way.
  autograd::NoGradGuard no_grad;
  const std::vector<zero::FlatRange> ranges = view.flat_ranges(mine);
  std::map<std::string, uint64_t> checksums;  // by state; map nodes stay where the writer puts sums
  std::map<std::string, std::vector<nn::StreamedTensor>> by_kind;  // one file per kind of state
  for (const zero::FlatRange& state : ranges)
    by_kind[checkpoint_state_kind(state.name)].push_back(
        {state.name, state.dtype(), {mine.size()},
         [&state, mine](int64_t begin, int64_t count) {
           return state.over({mine.begin + begin, mine.begin + begin + count});
         },
         &checksums[state.name]});
  const int64_t optimizer_step = view.optimizer_steps();
  const std::vector<std::string> state_names = view.optimizer_state_names();  // "exp_avg", ...
  // What only this rank at this world size can use (1-bit Adam's error feedback): a file of its own.
  const std::vector<Tensor> local_state = optimizer()->rank_local_state();
  try {
    for (const auto& [kind, kind_tensors] : by_kind) {
      nn::save_safetensors_streamed((tmp_dir / my_file(kind)).string(), kind_tensors);
      crash_here_for_tests("shard", job.rank() == job.size() - 1);
    }
    if (!local_state.empty()) {
      std::vector<std::pair<std::string, Tensor>> named;
      for (size_t i = 0; i < local_state.size(); ++i)
        named.emplace_back("local." + std::to_string(i), local_state[i].to(kCPU));
      nn::save_safetensors((tmp_dir / my_file(kRankLocalKind)).string(), named);
    }
  } catch (const Error&) {
    // A write that fails (a full disk) leaves no half-written tag behind; the previous tag and
    // `latest` were never touched. (In a job, the error then ends every rank.)
    std::error_code ignored;
    fs::remove_all(tmp_dir, ignored);
    throw;
  }
  std::vector<std::string> states = {"param"};
  if (has_master) states.push_back("master");
  for (const std::string& state : state_names) states.push_back("optim." + state);
  // The checksums go to rank 0 for the index.
  const Tensor mine_sums = gathered_checksums(group, checksums, states);  // [data rank][state]
  const Tensor stage_sums = Tensor::empty({tensor_group.size(), mine_sums.numel()}, DType::I64);  // [tensor rank]...
  tensor_group.all_gather(mine_sums.view({-1}), stage_sums.view({-1}));
  const Tensor sums = Tensor::empty({pipeline_group.size(), stage_sums.numel()}, DType::I64);  // [stage]...
  pipeline_group.all_gather(stage_sums.view({-1}), sums.view({-1}));
  job.barrier();

  if (writes_index) {
    using Layout = JsonWriter::Layout;
    JsonWriter w;
    w.begin_object();
    w.member("format", kCheckpointFormat).member("tag", tag).member("world_size", world).member("zero_stage", stage);
    w.member("tensor_parallel_size", tensor_group.size()).member("pipeline_parallel_size", pipeline_group.size());
    w.member("dtype", dtype_name(param_dtype)).member("mixed_precision", has_master);
    w.member("parameters", partitions.back().end).member("checksum", kCheckpointChecksum);
    write_shard_table(w.key("shards"), sums, states, partitions, tensor_group.size(), world, stage, file_of);
    write_tensor_table(w.key("tensors"), table, param_dtype);
    w.key("optimizer").begin_object(Layout::Inline).member("type", optimizer()->type()).member("step", optimizer_step);
    w.key("states").begin_array();
    for (const std::string& name : state_names) w.value(name);  // optimizer state names come from user code
    w.end_array().key("lr").begin_array();
    for (size_t g = 0; g < optimizer()->param_groups().size(); ++g) w.value(optimizer()->lr(g));
    w.end_array().key("weight_decay").begin_array();
    for (size_t g = 0; g < optimizer()->param_groups().size(); ++g) w.value(optimizer()->weight_decay(g));
    w.end_array();
    // Per-parameter scalars (1-bit LAMB's trust-ratio state): the same on every rank.
    if (const auto scalars = optimizer()->scalar_state_dict(); !scalars.empty()) {
      w.key("scalars").begin_object(Layout::Inline);
      for (const auto& [name, value] : scalars) w.member(name, value);
      w.end_object();
    }
    w.end_object();
    w.key("engine").begin_object(Layout::Inline).member("global_steps", global_steps_);
    w.member("global_samples", global_samples_).member("micro_steps", micro_steps_);
    w.member("skipped_steps", skipped_steps_).end_object();
    if (scheduler_)
      w.key("scheduler").begin_object(Layout::Inline)
          .member("last_batch_iteration", scheduler_->state_dict().last_batch_iteration).end_object();
    if (scaler_) {
      const LossScalerState st = scaler_->state();
      w.key("loss_scaler").begin_object(Layout::Inline).member("dynamic", st.dynamic).member("scale", st.scale);
      w.member("cur_iter", st.cur_iter).member("last_overflow_iter", st.last_overflow_iter);
      w.member("cur_hysteresis", st.cur_hysteresis).member("skipped_steps", st.skipped_steps);
      w.member("overflows", st.overflows).end_object();
    }
    if (loader_) {
      const DataLoaderState st = loader_->state();
      // The dataset's size and the global batch give the position its meaning (docs/data.md).
      w.key("data_loader").begin_object(Layout::Inline).member("epoch", st.epoch).member("step", st.step);
      w.member("samples", loader_->dataset().size()).member("global_batch", loader_->global_batch_size()).end_object();
    }
    w.member("rank_local_state", !local_state.empty());
    w.member("config", config_json_).member("client_state", client_state);
    w.end_object();
    const std::string index = w.str() + "\n";
    write_atomically(tmp_dir / "index.json", index);
    crash_here_for_tests("index", true);
    fs::remove_all(final_dir);
    fs::rename(tmp_dir, final_dir);
    fsync_path(dir);
    write_atomically(fs::path(dir) / "latest", tag);
  }
  job.barrier();
}

// The optimizer's rank-local state (nn::Optimizer::rank_local_state) comes back only to the same
// rank at the same world size; elsewhere it starts afresh, as DeepSpeed's always does.
void Engine::load_rank_local_state(const CheckpointReader& saved) {
  const JsonValue* has_local = saved.index().find("rank_local_state");
  if (!has_local || !has_local->as_bool()) return;
  parallel::Communicator& group = state_->data_group();
  if (saved.world_size() != group.size() || saved.tensor_parallel_size() != state_->groups().tensor().size()) {
    if (group.rank() == 0)
      FATHOM_LOG(Info, "load_checkpoint: ", optimizer()->type(), "'s rank-local state (1-bit Adam's error feedback) ",
                 "was saved at ", saved.world_size(), " x ", saved.tensor_parallel_size(), " ranks and this run has ",
                 group.size(), " x ", state_->groups().tensor().size(), ": it starts from zero");
    return;
  }
  parallel::GridCoord coord = state_->groups().coord();
  coord.data = group.rank();
  const fs::path file = fs::path(saved.index_path()).parent_path() /
                        checkpoint_file_name(coord, state_->groups().topology(), kRankLocalKind);
  const std::map<std::string, Tensor> tensors = nn::load_safetensors(file.string());
  std::vector<Tensor> state;
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto it = tensors.find("local." + std::to_string(i));
    FATHOM_CHECK(it != tensors.end(), "checkpoint ", file.string(), ": no tensor local.", i,
                 "; the file is damaged, or from another run");
    state.push_back(it->second);
  }
  optimizer()->load_rank_local_state(state);
}

std::string Engine::load_checkpoint(const std::string& dir, std::string tag) {
  FATHOM_CHECK(optimizer() != nullptr, "load_checkpoint: this engine has no optimizer (it evaluates only); load "
               "the model's weights with Module::load_state_dict instead");
  CheckpointReader saved(dir, tag);
  const JsonValue& index = saved.index();
  const std::string index_path = saved.index_path();
  zero::FlatStateView& view = state_->flat_view();
  const std::vector<TensorSlot> slots = view.flat_slots();
  // The model must be the one saved: same tensors, same unsplit shapes (same order, when this
  // rank holds the whole model).
  const parallel::Communicator& pipeline_group = state_->groups().pipeline();
  std::string mismatch;  // a pipeline stage checks its own parameters: every rank stops if one fails
  try {
    check_checkpoint_model(saved, slots, state_->placements(), /*whole_model=*/pipeline_group.size() == 1);
  } catch (const Error& e) {
    mismatch = e.message();
  }
  const bool everywhere = state_->groups().world_ptr()->all_reduce_scalar(mismatch.empty() ? 0.0 : 1.0,
                                                                          parallel::ReduceOp::Max) == 0.0;
  FATHOM_CHECK(mismatch.empty(), mismatch);
  FATHOM_CHECK(everywhere, "checkpoint ", saved.index_path(), " does not hold another pipeline stage's parameters (that "
               "stage's ranks name them); it was saved from another model");
  const JsonValue& optimizer_index = index.at("optimizer");
  nn::Optimizer& opt = *optimizer();
  const auto& lrs = optimizer_index.at("lr").as_array();
  const auto& decays = optimizer_index.at("weight_decay").as_array();
  FATHOM_CHECK(optimizer_index.at("type").as_string() == opt.type(), "checkpoint ", index_path, ": its optimizer is ",
               optimizer_index.at("type").as_string(), " but this engine's is ", opt.type());
  FATHOM_CHECK(lrs.size() == opt.param_groups().size(), "checkpoint ", index_path, ": ", lrs.size(),
               " parameter groups saved, ", opt.param_groups().size(), " in this optimizer");
  zero::SavedStates saved_states;
  saved_states.has_master = index.at("mixed_precision").as_bool();
  saved_states.optimizer_step = optimizer_index.at("step").as_int64();
  for (const auto& state : optimizer_index.at("states").as_array()) saved_states.optimizer_states.push_back(state.as_string());
  for (size_t g = 0; g < lrs.size(); ++g) {
    saved_states.scalars.scalars.emplace_back("param_groups." + std::to_string(g) + ".lr", lrs[g].as_double());
    saved_states.scalars.scalars.emplace_back("param_groups." + std::to_string(g) + ".weight_decay",
                                              decays.at(g).as_double());
  }
  if (const JsonValue* scalars = optimizer_index.find("scalars"))
    for (const auto& [name, value] : scalars->as_object()) saved_states.scalars.scalars.emplace_back(name, value.as_double());
  // Parameters, fp32 masters and optimizer states, resharded for this rank's layout.
  const parallel::Communicator& tensor_group = state_->groups().tensor();
  view.load_flat_ranges(
      checkpoint_flat_reader(saved, slots, state_->placements(),
                             {pipeline_group.size(), pipeline_group.rank(), tensor_group.size(), tensor_group.rank()}),
      saved_states);

  load_rank_local_state(saved);

  // Schedule, loss scaler, counters, data position.
  const JsonValue& engine = index.at("engine");
  global_steps_ = engine.at("global_steps").as_int64();
  global_samples_ = engine.at("global_samples").as_int64();
  micro_steps_ = engine.at("micro_steps").as_int64();
  skipped_steps_ = engine.at("skipped_steps").as_int64();
  if (const JsonValue* s = index.find("scheduler"); s && scheduler_) {
    scheduler_->load_state_dict({s->at("last_batch_iteration").as_int64()});
    apply_scheduled_lr();
  }
  if (const JsonValue* s = index.find("loss_scaler"); s && scaler_) {
    LossScalerState st;
    st.dynamic = s->at("dynamic").as_bool();
    st.scale = s->at("scale").as_double();
    st.cur_iter = s->at("cur_iter").as_int64();
    st.last_overflow_iter = s->at("last_overflow_iter").as_int64();
    st.cur_hysteresis = s->at("cur_hysteresis").as_int64();
    st.skipped_steps = s->at("skipped_steps").as_int64();
    st.overflows = s->at("overflows").as_int64();
    scaler_->load_state(st);
  }
  if (const JsonValue* s = index.find("data_loader"); s && loader_) loader_->load_state(resumed_position(*s, *loader_));
  return index.at("client_state").as_string();
}

}  // namespace fathom
