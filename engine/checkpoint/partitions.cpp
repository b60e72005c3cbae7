#include "engine/checkpoint/partitions.h"

#include <algorithm>

#include "core/error.h"
#include "parallel/pipeline_transport.h"

namespace fathom {

std::vector<SavedTensor> partition_table(const std::vector<zero::FlatSlot>& slots,
                                         const std::vector<nn::Placement>& placements, int tensor_size) {
  FATHOM_CHECK(slots.size() == placements.size(), "checkpoint: ", placements.size(), " placements for ", slots.size(),
               " parameters");
  std::vector<SavedTensor> table;
  int64_t offset = 0;
  for (int t = 0; t < tensor_size; ++t)
    for (size_t i = 0; i < slots.size(); ++i) {
      const nn::Placement& mine = placements[i];
      FATHOM_CHECK(!mine.sharded() || mine.num_shards == tensor_size, "checkpoint: \"", slots[i].name,
                   "\" is split in ", mine.num_shards, " shards but the tensor-parallel group has ", tensor_size,
                   " ranks");
      SavedTensor entry;
      entry.name = slots[i].name;
      entry.placement = mine.sharded() ? mine.of_rank(t) : mine;
      entry.shape = nn::shard_shape(nn::full_shape(slots[i].shape, mine), entry.placement);
      entry.offset = offset;
      entry.tensor_rank = t;
      offset += entry.numel();
      table.push_back(std::move(entry));
    }
  return table;
}

std::vector<SavedTensor> pipeline_table(parallel::Communicator& pipeline, const std::vector<SavedTensor>& stage_table) {
  if (pipeline.size() == 1) return stage_table;
  JsonWriter w;
  write_tensor_table(w, stage_table, DType::F32);
  const std::vector<std::string> tables = parallel::all_gather_text(pipeline, w.str());
  std::vector<SavedTensor> whole;
  int64_t offset = 0;
  for (int stage = 0; stage < pipeline.size(); ++stage) {
    int64_t end = offset;
    for (SavedTensor& entry : read_tensor_table(parse_json(tables[stage], "a stage's tensor table"), "")) {
      entry.pipeline_stage = stage;
      entry.offset += offset;
      end = std::max(end, entry.range().end);
      whole.push_back(std::move(entry));
    }
    offset = end;
  }
  return whole;
}

std::vector<zero::Range> partition_ranges(const std::vector<SavedTensor>& table, int pipeline_size, int tensor_size) {
  std::vector<zero::Range> ranges(pipeline_size * tensor_size);
  for (int t = 0; t < static_cast<int>(ranges.size()); ++t) {
    bool first = true;
    for (const SavedTensor& entry : table) {
      if (entry.partition(tensor_size) != t) continue;
      if (first) ranges[t] = {entry.offset, entry.offset};
      first = false;
      ranges[t].end = entry.range().end;
    }
    if (first && t > 0) ranges[t] = {ranges[t - 1].end, ranges[t - 1].end};
  }
  return ranges;
}

void write_tensor_table(JsonWriter& w, const std::vector<SavedTensor>& table, DType dtype) {
  using Layout = JsonWriter::Layout;
  w.begin_array();
  for (const SavedTensor& entry : table) {
    w.begin_object(Layout::Inline).member("name", entry.name);
    w.key("shape").begin_array();
    for (int64_t d : entry.shape) w.value(d);
    w.end_array().member("dtype", dtype_name(dtype)).member("offset", entry.offset);
    const nn::Placement& p = entry.placement;
    if (entry.tensor_rank > 0 || p.sharded()) w.member("tensor_rank", entry.tensor_rank);
    if (entry.pipeline_stage > 0) w.member("pipeline_stage", entry.pipeline_stage);
    if (p.sharded()) {
      w.key("split").begin_object(Layout::Inline).member("dim", p.sharded_dim).member("shards", p.num_shards);
      w.member("full", p.full_size).member("stored", p.stored_size).member("parts", p.fused_parts).end_object();
    }
    w.end_object();
  }
  w.end_array();
}

std::vector<SavedTensor> read_tensor_table(const JsonValue& tensors, const std::string& index_path) {
  std::vector<SavedTensor> table;
  for (const JsonValue& item : tensors.as_array()) {
    SavedTensor entry;
    entry.name = item.at("name").as_string();
    for (const JsonValue& d : item.at("shape").as_array()) entry.shape.push_back(d.as_int64());
    entry.offset = item.at("offset").as_int64();
    if (const JsonValue* t = item.find("tensor_rank")) entry.tensor_rank = static_cast<int>(t->as_int64());
    if (const JsonValue* s = item.find("pipeline_stage")) entry.pipeline_stage = static_cast<int>(s->as_int64());
    if (const JsonValue* split = item.find("split")) {
      entry.placement = nn::Placement::shard(static_cast<int>(split->at("dim").as_int64()),
                                             static_cast<int>(split->at("shards").as_int64()), entry.tensor_rank,
                                             split->at("full").as_int64(), split->at("stored").as_int64(),
                                             static_cast<int>(split->at("parts").as_int64()));
      FATHOM_CHECK(nn::shard_shape(entry.full_shape(), entry.placement) == entry.shape, "checkpoint ", index_path,
                   ": tensor \"", entry.name, "\" of tensor-parallel rank ", entry.tensor_rank, " has shape ",
                   shape_str(entry.shape), ", which its split does not give; the index is damaged");
    }
    table.push_back(std::move(entry));
  }
  return table;
}

std::string model_signature(const std::vector<zero::FlatSlot>& slots, const std::vector<nn::Placement>& placements) {
  std::string text;
  for (size_t i = 0; i < slots.size(); ++i) {
    const nn::Placement& p = placements.at(i);
    text += slots[i].name + shape_str(nn::full_shape(slots[i].shape, p));
    if (p.sharded())
      text += "/" + std::to_string(p.sharded_dim) + "," + std::to_string(p.num_shards) + "," +
              std::to_string(p.stored_size) + "," + std::to_string(p.fused_parts);
    text += ";";
  }
  return text;
}

}  // namespace fathom
