#include "engine/data/loader.h"

#include <algorithm>

#include "engine/data/collate.h"
#include "engine/data/shuffle.h"

namespace fathom {

namespace {

// Named checks before anything is built: a wrong batch setting is a config error, not a crash.
const DataLoaderOptions& checked(const std::shared_ptr<const Dataset>& dataset, const DataLoaderOptions& o) {
  FATHOM_CHECK(dataset != nullptr, "DataLoader: the dataset is null; pass a std::shared_ptr to a Dataset");
  FATHOM_CHECK(o.micro_batch_size >= 1, "DataLoader: micro_batch_size is ", o.micro_batch_size, "; it must be at least 1");
  FATHOM_CHECK(o.gradient_accumulation_steps >= 1, "DataLoader: gradient_accumulation_steps is ",
               o.gradient_accumulation_steps, "; it must be at least 1");
  FATHOM_CHECK(o.dp_world_size >= 1, "DataLoader: dp_world_size is ", o.dp_world_size, "; it must be at least 1");
  FATHOM_CHECK(o.dp_rank >= 0 && o.dp_rank < o.dp_world_size, "DataLoader: dp_rank ", o.dp_rank,
               " is outside the data-parallel world of ", o.dp_world_size, " ranks (valid ranks: 0..",
               o.dp_world_size - 1, ")");
  const int64_t n = dataset->size();
  FATHOM_CHECK(n >= 1, "DataLoader: the dataset is empty");
  const int64_t global = o.micro_batch_size * o.gradient_accumulation_steps * o.dp_world_size;
  FATHOM_CHECK(!o.drop_last || n >= global, "DataLoader: the dataset has ", n,
               " samples, fewer than one global batch of ", global, " (micro_batch_size ", o.micro_batch_size,
               " x gradient_accumulation_steps ", o.gradient_accumulation_steps, " x dp_world_size ", o.dp_world_size,
               "), so drop_last leaves no steps; use smaller batches, more data, or drop_last = false");
  return o;
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options)
    : dataset_(std::move(dataset)),
      options_(checked(dataset_, options)),
      map_(dataset_->size(), options_.micro_batch_size, options_.gradient_accumulation_steps, options_.dp_world_size,
           options_.drop_last),
      like_(dataset_->get(0)) {}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, int64_t micro_batch_size,
                       int64_t gradient_accumulation_steps, int64_t dp_rank, int64_t dp_world_size, bool shuffle,
                       uint64_t seed, bool drop_last)
    : DataLoader(std::move(dataset), DataLoaderOptions{.micro_batch_size = micro_batch_size,
                                                       .gradient_accumulation_steps = gradient_accumulation_steps,
                                                       .dp_rank = dp_rank,
                                                       .dp_world_size = dp_world_size,
                                                       .shuffle = shuffle,
                                                       .seed = seed,
                                                       .drop_last = drop_last}) {}

const std::vector<int64_t>& DataLoader::order(int64_t epoch) const {
  if (epoch != order_epoch_) {
    order_ = epoch_order(dataset_->size(), options_.shuffle, options_.seed, epoch);
    order_epoch_ = epoch;
  }
  return order_;
}

void DataLoader::check_step(int64_t epoch, int64_t step) const {
  FATHOM_CHECK(epoch >= 0, "DataLoader: epoch ", epoch, " is negative");
  FATHOM_CHECK(step >= 0 && step < steps_per_epoch(), "DataLoader: step ", step, " is outside the epoch's ",
               steps_per_epoch(), " steps (valid: 0..", steps_per_epoch() - 1, ")");
}

std::vector<int64_t> DataLoader::global_batch_indices(int64_t epoch, int64_t step) const {
  check_step(epoch, step);
  const PositionRange range = map_.global_batch(step);
  const std::vector<int64_t>& visit = order(epoch);
  return {visit.begin() + range.begin, visit.begin() + range.end};
}

int64_t DataLoader::global_targets(int64_t epoch, int64_t step) const {
  if (epoch != targets_epoch_ || step != targets_step_) {
    int64_t count = 0;
    for (int64_t index : global_batch_indices(epoch, step)) count += dataset_->count_targets(index, options_.ignore_index);
    targets_epoch_ = epoch;
    targets_step_ = step;
    targets_count_ = count;
  }
  return targets_count_;
}

Batch DataLoader::batch(int64_t epoch, int64_t step, int64_t micro_step) const {
  check_step(epoch, step);
  FATHOM_CHECK(micro_step >= 0 && micro_step < options_.gradient_accumulation_steps, "DataLoader: micro_step ",
               micro_step, " is outside the ", options_.gradient_accumulation_steps, " gradient accumulation steps");
  const PositionRange range = map_.micro_batch(step, micro_step, options_.dp_rank);
  const std::vector<int64_t>& visit = order(epoch);
  std::vector<int64_t> indices(visit.begin() + range.begin, visit.begin() + range.end);
  std::vector<Sample> samples;
  samples.reserve(indices.size());
  for (int64_t index : indices) samples.push_back(dataset_->get(index));

  Batch batch;
  Sample stacked = collate(samples, indices, like_);
  batch.inputs = std::move(stacked.input);
  batch.targets = std::move(stacked.target);
  batch.sample_index = Tensor::empty({static_cast<int64_t>(indices.size())}, DType::I64);
  std::copy(indices.begin(), indices.end(), batch.sample_index.data<int64_t>());
  batch.global_targets = global_targets(epoch, step);
  // A global batch whose targets are all ignored has a zero loss sum; dividing it by 1 rather
  // than 0 keeps the loss (and every gradient) at 0 instead of NaN.
  batch.loss_normaliser = static_cast<double>(std::max<int64_t>(batch.global_targets, 1)) /
                          static_cast<double>(options_.dp_world_size * options_.gradient_accumulation_steps);
  batch.epoch = static_cast<int>(epoch);
  batch.step = step;
  batch.micro_step = static_cast<int>(micro_step);
  return batch;
}

void DataLoader::roll_over() {
  if (next_micro_ >= batches_per_epoch()) {
    ++epoch_;
    next_micro_ = 0;
  }
}

void DataLoader::set_epoch(int64_t epoch) {
  FATHOM_CHECK(epoch >= 0, "DataLoader::set_epoch: epoch ", epoch, " is negative");
  epoch_ = epoch;
  next_micro_ = 0;
}

DataLoaderState DataLoader::state() const {
  if (next_micro_ >= batches_per_epoch()) return {epoch_ + 1, 0};
  return {epoch_, next_micro_ / options_.gradient_accumulation_steps};
}

void DataLoader::load_state(const DataLoaderState& state) {
  FATHOM_CHECK(state.epoch >= 0 && state.step >= 0 && state.step <= steps_per_epoch(), "DataLoader::load_state: epoch ",
               state.epoch, ", step ", state.step, " is not a position of this loader (", steps_per_epoch(),
               " steps per epoch); the checkpoint was written with another dataset or batch size — resume with the "
               "same dataset, micro_batch_size x gradient_accumulation_steps x dp_world_size, and drop_last");
  epoch_ = state.epoch;
  next_micro_ = state.step * options_.gradient_accumulation_steps;
  roll_over();
}

DataLoader::Iterator::Iterator(DataLoader* loader) : loader_(loader) {
  loader_->roll_over();
  ++*this;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  DataLoader& loader = *loader_;
  if (loader.next_micro_ >= loader.batches_per_epoch()) {
    loader_ = nullptr;
    return *this;
  }
  const int64_t gas = loader.options_.gradient_accumulation_steps;
  batch_ = loader.batch(loader.epoch_, loader.next_micro_ / gas, loader.next_micro_ % gas);
  ++loader.next_micro_;  // the batch is handed out: state() now points past it
  return *this;
}

}  // namespace fathom
