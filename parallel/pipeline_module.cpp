#include "parallel/pipeline_module.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "autograd/checkpoint.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/logging.h"
#include "parallel/pipeline_partition.h"

namespace fathom::parallel {
namespace {

using Owned = std::set<const void*>;  // parameter identities (VariableImpl*)

// A module of the whole model that this stage holds only part of.
struct PartOfModel final : nn::Module {
  explicit PartOfModel(std::string type) : type_(std::move(type)) {}
  std::string type_name() const override { return type_; }
  std::string type_;
};

// How many of a subtree's parameters this stage owns, and how many it has.
std::pair<size_t, size_t> ownership(const nn::Module& module, const Owned& owned) {
  size_t mine = 0, all = 0;
  for (const auto& [name, parameter] : module.named_parameters()) {
    ++all;
    mine += owned.count(parameter.impl().get());
  }
  return {mine, all};
}

// Registers under `target` the part of `source` this stage owns: a child whose parameters are
// all owned (or that has none: dropouts, whose streams are keyed by name) as it is, a partly
// owned child as a PartOfModel holding the owned part, an unowned one not at all.
void adopt(nn::Module& target, const nn::Module& source, const Owned& owned) {
  for (const auto& [name, parameter] : source.named_parameters(/*recurse=*/false))
    if (owned.count(parameter.impl().get())) {
      target.register_parameter(name, parameter);
      target.set_placement(name, source.placement(name));
    }
  for (const auto& [name, child] : source.children()) {
    const auto [mine, all] = ownership(*child, owned);
    if (mine == all) {
      target.register_module(name, child);
    } else if (mine > 0) {
      auto part = target.register_module(name, std::make_shared<PartOfModel>(child->type_name()));
      adopt(*part, *child, owned);
    }
  }
}

// The module directly holding `dotted` under `root`, and the parameter's name there.
std::pair<nn::Module*, std::string> owner_of(nn::Module& root, const std::string& dotted) {
  nn::Module* module = &root;
  std::string rest = dotted;
  for (size_t dot; (dot = rest.find('.')) != std::string::npos;) {
    const std::string head = rest.substr(0, dot);
    nn::Module* next = nullptr;
    for (const auto& [name, child] : module->children())
      if (name == head) next = child.get();
    if (next == nullptr) break;
    module = next;
    rest = rest.substr(dot + 1);
  }
  return {module, rest};
}

}  // namespace

namespace {
nn::LayerSequence& as_layers(const std::shared_ptr<nn::Module>& model) {
  FATHOM_CHECK(model != nullptr, "PipelineModule: the model is null");
  auto* layers = dynamic_cast<nn::LayerSequence*>(model.get());
  FATHOM_CHECK(layers != nullptr, "PipelineModule: ", model->type_name(),
               " is not a list of layers; derive it from nn::LayerSequence (num_layers, forward_layer, "
               "layer_parameters) so that it can be cut into stages");
  return *layers;
}

std::vector<LayerDescription> describe_layers(const std::shared_ptr<nn::Module>& model) {
  nn::LayerSequence& layers = as_layers(model);
  std::vector<LayerDescription> out;
  for (size_t i = 0; i < layers.num_layers(); ++i) {
    int64_t count = 0;
    for (const std::string& name : layers.layer_parameters(i)) count += model->parameter(name).numel();
    out.push_back({layers.layer_type(i), count});
  }
  return out;
}
}  // namespace

PipelineModule::PipelineModule(std::shared_ptr<nn::Module> model, const ProcessGroups& groups, PipelineOptions options)
    : groups_(groups) {
  const std::vector<LayerDescription> layers = describe_layers(model);
  assemble(layers, [&model](const std::vector<bool>&) { return model; }, options);
}

PipelineModule::PipelineModule(const std::vector<LayerDescription>& layers, const LayerBuilder& build,
                               const ProcessGroups& groups, PipelineOptions options)
    : groups_(groups) {
  FATHOM_CHECK(build != nullptr, "PipelineModule: no layer builder");
  assemble(layers, build, options);
}

void PipelineModule::assemble(const std::vector<LayerDescription>& descriptions, const LayerBuilder& build,
                              const PipelineOptions& options) {
  FATHOM_CHECK(options.chunks >= 1, "PipelineModule: chunks (virtual_stages) must be >= 1, got ", options.chunks);
  stage_ = groups_.pipeline().rank();
  stages_ = groups_.pipeline().size();
  chunks_ = options.chunks;
  FATHOM_CHECK(options.activation_checkpoint_interval >= 0, "PipelineModule: activation_checkpoint_interval must be "
               ">= 0, got ", options.activation_checkpoint_interval);
  checkpoint_interval_ = options.activation_checkpoint_interval;

  const size_t n = descriptions.size();
  for (const LayerDescription& layer : descriptions) layer_parameters_.push_back(layer.parameters);
  FATHOM_CHECK(static_cast<int>(n) >= num_virtual_stages(), "pipeline: ", num_virtual_stages(),
               chunks_ > 1 ? " virtual stages (stages x virtual_stages)" : " stages", " but the model has ", n,
               " layers; use at most ", n, chunks_ > 1 ? " virtual stages" : " stages");
  boundaries_ = partition_layers(options.partition, descriptions, num_virtual_stages());

  std::vector<int> layer_stage(n);
  std::vector<bool> mine(n);
  for (int v = 0; v < num_virtual_stages(); ++v)
    for (size_t i = boundaries_[v]; i < boundaries_[v + 1]; ++i) layer_stage[i] = v % stages_;
  for (size_t i = 0; i < n; ++i) mine[i] = layer_stage[i] == stage_;
  model_ = build(mine);
  layers_ = &as_layers(model_);
  FATHOM_CHECK(layers_->num_layers() == n, "PipelineModule: the model has ", layers_->num_layers(),
               " layers but was described with ", n);
  Owned owned;
  for (size_t i = 0; i < n; ++i)
    if (mine[i])
      for (const std::string& name : layers_->layer_parameters(i)) owned.insert(model_->parameter(name).impl().get());
  adopt(*this, *model_, owned);
  place_parameters(layers_->ties(), layer_stage);
  // A model built whole: the other stages' parameters are not this rank's to keep.
  for (const auto& [name, parameter] : model_->named_parameters())
    if (!owned.count(parameter.impl().get()))
      parameter.set_data(Tensor::empty({0}, parameter.dtype(), parameter.device()));

  const GridCoord coord = groups_.coord();
  if (coord.pipeline == 0 && coord.data == 0 && coord.tensor == 0)
    FATHOM_LOG(Info, "pipeline: " + std::to_string(n) + " layers over " + std::to_string(stages_) + " stages (" +
                         options.partition + ")\n" + describe());
}

void PipelineModule::place_parameters(const std::vector<nn::Tie>& ties, const std::vector<int>& layer_stage) {
  const auto named = named_parameters();
  for (const auto& [dotted, parameter] : named) {
    auto [owner, local] = owner_of(*this, dotted);
    nn::Placement where = placement(dotted);
    where.pipeline_stage = stage_;
    owner->set_placement(local, where);
  }
  for (const nn::Tie& tie : ties) {
    std::set<int> stages;
    for (size_t layer : tie.layers) stages.insert(layer_stage.at(layer));
    if (stages.size() < 2) continue;  // one stage holds every use: autograd sums them
    const bool holds = stages.count(stage_) > 0;
    // Collective over the pipeline group: every rank splits, holders into one group.
    std::shared_ptr<Communicator> group = groups_.pipeline().split(holds ? 0 : 1, stage_, "tie:" + tie.name);
    if (!holds) continue;
    const autograd::Variable shared = model_->parameter(tie.parameter);
    size_t index = named.size();
    for (size_t i = 0; i < named.size(); ++i)
      if (named[i].second.same(shared)) index = i;
    FATHOM_CHECK(index < named.size(), "pipeline: tie \"", tie.name, "\" (", tie.parameter,
                 ") is used by this stage's layers but not among its parameters");
    auto [owner, local] = owner_of(*this, named[index].first);
    nn::Placement where = placement(named[index].first);
    where.tie = tie.name;
    where.tie_leader = layer_stage.at(tie.layers.front()) == stage_;
    owner->set_placement(local, where);
    ties_.push_back({tie.name, index, std::move(group)});
  }
}

void PipelineModule::set_chunk(int chunk) {
  FATHOM_CHECK(chunk >= 0 && chunk < chunks_, "PipelineModule: chunk ", chunk, " of ", chunks_);
  chunk_ = chunk;
}

autograd::Variable PipelineModule::forward(const autograd::Variable& input) {
  const int v = virtual_stage(chunk_);
  size_t layer = boundaries_[v];
  const size_t end = boundaries_[v + 1];
  autograd::Variable x = input;
  if (checkpoint_interval_ == 0 || !autograd::is_grad_enabled()) return layers_->forward_layers(x, layer, end);
  for (; layer < end && !is_floating_point(x.dtype()); ++layer) x = layers_->forward_layer(layer, x);
  for (; layer < end; layer += checkpoint_interval_) {
    const size_t group_end = std::min(end, layer + checkpoint_interval_);
    x = autograd::checkpoint(
        [this, layer, group_end](const autograd::VariableList& in) {
          return autograd::VariableList{layers_->forward_layers(in[0], layer, group_end)};
        },
        {x})[0];
  }
  return x;
}

std::string PipelineModule::describe() const {
  std::ostringstream out;
  for (int v = 0; v < num_virtual_stages(); ++v) {
    const size_t begin = boundaries_[v], end = boundaries_[v + 1];
    int64_t parameters = 0;
    std::vector<std::pair<std::string, int>> types;  // runs of one type
    for (size_t i = begin; i < end; ++i) {
      parameters += layer_parameters_[i];
      const std::string type = layers_->layer_type(i);
      if (types.empty() || types.back().first != type) types.push_back({type, 0});
      ++types.back().second;
    }
    out << "  stage " << v % stages_;
    if (chunks_ > 1) out << " chunk " << v / stages_;
    out << ": layers [" << begin << ", " << end << ") ";
    for (size_t t = 0; t < types.size(); ++t)
      out << (t ? ", " : "") << (types[t].second > 1 ? std::to_string(types[t].second) + " x " : "") << types[t].first;
    out << ", " << parameters << " parameters" << (v + 1 < num_virtual_stages() ? "\n" : "");
  }
  return out.str();
}

}  // namespace fathom::parallel
