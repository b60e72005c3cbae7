#pragma once
// DataLoader: one data-parallel rank's stream of micro-batches.
//
// Every rank builds the same epoch order (identity, or a permutation seeded by (seed, epoch))
// and reads its own slots of each global batch through a fixed SampleMap (data_sample_map.h),
// so for a given global batch size the samples of every optimizer step are the same at every
// data-parallel world size and accumulation count. docs/data.md explains the map, shuffling,
// loss_normaliser and resuming.
//
//   auto data = std::make_shared<TokenDataset>(TokenDataset::from_file("train.bin", 1024));
//   DataLoader loader(data, {.micro_batch_size = 8, .gradient_accumulation_steps = 4,
//                                  .dp_rank = rank, .dp_world_size = world, .seed = 7});
//   for (int epoch = 0; epoch < epochs; ++epoch)
//     for (const Batch& batch : loader) { ... }   // one epoch of this rank's micro-batches
//
// Not thread-safe: one loader per training loop.

#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "engine/data/sample_map.h"
#include "engine/data/dataset.h"

namespace fathom {

struct DataLoaderOptions {
  int64_t micro_batch_size = 1;             // samples per micro-batch per rank
  int64_t gradient_accumulation_steps = 1;  // micro-batches per optimizer step per rank
  int64_t dp_rank = 0;
  int64_t dp_world_size = 1;
  bool shuffle = true;  // a new seeded permutation every epoch (as DeepSpeed's DistributedSampler)
  uint64_t seed = 0;
  // true: an epoch's short last global batch is skipped. false: it is kept and split over all
  // ranks and micro-steps, and some micro-batches may then have fewer rows — even none.
  bool drop_last = true;
  int64_t ignore_index = kIgnoreIndex;  // targets equal to this are not counted by loss_normaliser
};

struct Batch {
  Tensor inputs;        // [rows, ...sample input shape], e.g. [B, T] i64 tokens
  Tensor targets;       // [rows, ...sample target shape], e.g. [B, T] i64 next tokens
  Tensor sample_index;  // [rows] i64: each row's dataset index (the "global sample index")
  // Counted targets (!= ignore_index) of the whole global batch over dp · gas. Summing the
  // per-target losses of this micro-batch and dividing by loss_normaliser, then letting the
  // engine divide by gas and DP average, yields exactly the global batch's token-mean gradient.
  double loss_normaliser = 1.0;
  int64_t global_targets = 0;  // the counted targets of the whole global batch
  int epoch = 0;
  int64_t step = 0;    // optimizer step within the epoch
  int micro_step = 0;  // in [0, gradient_accumulation_steps)
  int64_t rows() const { return sample_index.numel(); }
};

// Where a loader stands, for checkpoints: the next optimizer step to run. A state taken in the
// middle of a step names that step, so resuming replays it from its first micro-batch
// (accumulated gradients are not part of a checkpoint).
struct DataLoaderState {
  int64_t epoch = 0;
  int64_t step = 0;
  friend bool operator==(const DataLoaderState&, const DataLoaderState&) = default;
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options);
  DataLoader(std::shared_ptr<const Dataset> dataset, int64_t micro_batch_size, int64_t gradient_accumulation_steps = 1,
             int64_t dp_rank = 0, int64_t dp_world_size = 1, bool shuffle = true, uint64_t seed = 0,
             bool drop_last = true);

  // Input iterator over the rest of the current epoch; advancing it moves the loader's position.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    const Batch& operator*() const { return batch_; }
    const Batch* operator->() const { return &batch_; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return loader_ == nullptr; }

   private:
    friend class DataLoader;
    explicit Iterator(DataLoader* loader);
    DataLoader* loader_;  // null at the end of the epoch
    Batch batch_;
  };
  // From the current position to the end of its epoch. When the previous loop finished an
  // epoch, this starts the next one, so `for (epoch...) for (batch : loader)` just works.
  Iterator begin() { return Iterator(this); }
  std::default_sentinel_t end() const { return {}; }

  int64_t steps_per_epoch() const { return map_.steps_per_epoch(); }
  // This rank's micro-batches per epoch: steps_per_epoch() · gradient_accumulation_steps.
  int64_t batches_per_epoch() const { return steps_per_epoch() * options_.gradient_accumulation_steps; }
  int64_t global_batch_size() const { return map_.global_batch_size(); }
  const DataLoaderOptions& options() const { return options_; }
  const Dataset& dataset() const { return *dataset_; }

  // Jump to the first step of `epoch`.
  void set_epoch(int64_t epoch);
  DataLoaderState state() const;
  void load_state(const DataLoaderState& state);

  // Random access, independent of the position: this rank's micro-batch, and the dataset
  // indices of a whole global batch (all ranks), for the engine and for tests.
  Batch batch(int64_t epoch, int64_t step, int64_t micro_step) const;
  std::vector<int64_t> global_batch_indices(int64_t epoch, int64_t step) const;

 private:
  const std::vector<int64_t>& order(int64_t epoch) const;
  int64_t global_targets(int64_t epoch, int64_t step) const;
  void check_step(int64_t epoch, int64_t step) const;
  // Moves a finished epoch's position to the start of the next one.
  void roll_over();

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  SampleMap map_;
  Sample like_;  // sample 0: shapes and dtypes of every sample (and of an empty micro-batch)
  int64_t epoch_ = 0;
  int64_t next_micro_ = 0;  // index into this rank's micro-batches of epoch_

  // Caches: the epoch's order, and one step's target count (shared by its gas micro-batches).
  mutable int64_t order_epoch_ = -1;
  mutable std::vector<int64_t> order_;
  mutable int64_t targets_epoch_ = -1, targets_step_ = -1, targets_count_ = 0;
};

}  // namespace fathom
