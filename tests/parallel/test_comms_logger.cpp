// The comms logger: nccl-tests' bandwidth definitions per op, and a ZeRO-2 step's collectives
// counted and sized from the parameter sizes and bucket sizes alone (the closed form is
// computed here, not read from the reducer).
#include <algorithm>
#include <map>

#include "autograd/functions.h"
#include "engine/initialize.h"
#include "mpi_test_util.h"
#include "test_util.h"
#include "nn/containers.h"
#include "nn/linear.h"
#include "parallel/comms_logger.h"
#include "parallel/local_communicator.h"

using namespace fathom;
using namespace fathom::parallel;
using fathom::testing::runtime;

TEST_CASE("bus bandwidth factors are nccl-tests'", "[comms]") {
  for (int n : {1, 2, 3, 8}) {
    const double r = n;
    CHECK(bus_bandwidth_factor(CollectiveKind::AllReduce, n) == Approx(2 * (r - 1) / r));
    CHECK(bus_bandwidth_factor(CollectiveKind::ReduceScatter, n) == Approx((r - 1) / r));
    CHECK(bus_bandwidth_factor(CollectiveKind::ReduceScatterV, n) == Approx((r - 1) / r));
    CHECK(bus_bandwidth_factor(CollectiveKind::AllGather, n) == Approx((r - 1) / r));
    CHECK(bus_bandwidth_factor(CollectiveKind::AllGatherV, n) == Approx((r - 1) / r));
    CHECK(bus_bandwidth_factor(CollectiveKind::Broadcast, n) == 1.0);
    CHECK(bus_bandwidth_factor(CollectiveKind::Send, n) == 1.0);
    CHECK(bus_bandwidth_factor(CollectiveKind::Barrier, n) == 0.0);
  }
  // A row's bandwidths: 1 MB in 2 ms on average over 4 ranks.
  const CommsRow row{"all_reduce", "data", 4, 1'000'000, 2, 4.0};
  CHECK(row.mean_ms() == Approx(2.0));
  CHECK(row.algbw_gbps() == Approx(0.5));
  CHECK(row.busbw_gbps() == Approx(0.5 * 2 * 3 / 4.0));
}

TEST_CASE("the logger counts what it is told to, with the message sizes of nccl-tests", "[comms]") {
  std::vector<std::string> lines;
  auto logger = std::make_shared<CommsLogger>(
      CommsLoggerOptions{.verbose = true, .prof_all = false, .debug = true, .prof_ops = {"all_gather", "all_reduce"}},
      [&](const std::string& line) { lines.push_back(line); });
  LocalCommunicator local;
  {
    CollectiveObservation watching(logger);
    local.all_reduce(Tensor::zeros({10}));                           // 40 B
    local.all_gather(Tensor::zeros({3}), Tensor::zeros({3}));        // the output: 12 B
    local.reduce_scatter(Tensor::zeros({5}), Tensor::zeros({5}));    // not in prof_ops
    local.all_reduce(Tensor::zeros({10}));
  }
  local.all_reduce(Tensor::zeros({10}));  // no longer observed
  const std::vector<CommsRow> rows = logger->rows();
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].op == "all_gather");
  CHECK(rows[0].bytes == 12);
  CHECK(rows[0].count == 1);
  CHECK(rows[1].op == "all_reduce");
  CHECK(rows[1].bytes == 40);
  CHECK(rows[1].count == 2);
  CHECK(rows[1].group_size == 1);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("comm op: all_reduce | group: ", 0) == 0);
  CHECK(lines[0].find(" | msg size: 40 B | algbw (GB/s): ") != std::string::npos);
  CHECK(lines[0].find(" f32") != std::string::npos);  // debug: the collective's number and dtype
  const std::string table = logger->summary();
  CHECK(table.find("total latency (ms)") != std::string::npos);
  CHECK(table.find("busbw (GB/s)") != std::string::npos);
  CHECK(table.find("all_gather") != std::string::npos);
}

namespace {
// ZeRO-2's gradient buckets from the parameter sizes: in reverse model order, a bucket closes
// before the parameter that would take it past `capacity`; a larger parameter is a bucket alone.
std::vector<int64_t> bucket_sizes(const std::vector<int64_t>& sizes, int64_t capacity) {
  std::vector<int64_t> buckets;
  int64_t filling = 0;
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    if (filling > 0 && filling + *it > capacity) buckets.push_back(std::exchange(filling, 0));
    filling += *it;
  }
  if (filling > 0) buckets.push_back(filling);
  return buckets;
}
}  // namespace

TEST_CASE("a ZeRO-2 step's collectives: counts and bytes from the parameter and bucket sizes", "[comms]") {
  const auto& world = runtime().world_ptr();
  const int n = world->size();
  constexpr int64_t kReduceBucket = 100, kAllgatherBucket = 60, kSteps = 2;
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(8, 16));
  model->push_back(std::make_shared<nn::Linear>(16, 4));
  const std::vector<int64_t> sizes = {8 * 16, 16, 16 * 4, 4};  // in model order
  const int64_t total = 8 * 16 + 16 + 16 * 4 + 4;

  Config config = Config::from_string(detail::concat(
      R"({"train_batch_size": )", 2 * n, R"(, "optimizer": {"type": "AdamW"}, "comms_logger": {"enabled": true},
      "zero_optimization": {"stage": 2, "reduce_bucket_size": )", kReduceBucket, R"(, "allgather_bucket_size": )",
      kAllgatherBucket, "}}"));
  Initialized init = initialize(config, model, nullptr, nullptr, world);
  const std::shared_ptr<CommsLogger>& logger = init.engine->comms_logger();
  REQUIRE(logger != nullptr);
  logger->reset();  // what initialize itself communicated
  for (int step = 0; step < kSteps; ++step) {
    autograd::Variable x(Tensor::full({2, 8}, 0.1 * (step + 1 + world->rank())));
    autograd::Variable out = (*init.engine)(x);
    init.engine->backward(autograd::sum(autograd::mul(out, out)));
    init.engine->step();
  }

  // The closed form, per message size.
  std::map<std::pair<std::string, int64_t>, int64_t> expected;
  if (n > 1) {
    for (int64_t bucket : bucket_sizes(sizes, kReduceBucket)) expected[{"reduce_scatter_v", bucket * 4}] += kSteps;
    const int64_t shard = (total + n - 1) / n;
    const int64_t piece = std::min(shard, kAllgatherBucket / n);
    for (int64_t start = 0; start < shard; start += piece)
      expected[{"all_gather", std::min(piece, shard - start) * n * 4}] += kSteps;
    expected[{"all_reduce", 8}] += 2 * kSteps;  // the step's mean loss and its gradient norm (f64)
  } else {
    // One rank: the buckets and the gather are still issued, on the one-rank group.
    for (int64_t bucket : bucket_sizes(sizes, kReduceBucket)) expected[{"reduce_scatter_v", bucket * 4}] += kSteps;
    const int64_t piece = std::min(total, kAllgatherBucket);
    for (int64_t start = 0; start < total; start += piece)
      expected[{"all_gather", std::min(piece, total - start) * 4}] += kSteps;
  }
  std::map<std::pair<std::string, int64_t>, int64_t> logged;
  for (const CommsRow& row : logger->rows()) {
    INFO(row.op << " " << row.bytes << " B on " << row.group);
    CHECK(row.group_size == n);
    logged[{row.op, row.bytes}] += row.count;
    if (row.mean_ms() > 0)
      CHECK(row.busbw_gbps() == Approx(row.algbw_gbps() * bus_bandwidth_factor(row.op == "all_reduce"
                                                                                   ? CollectiveKind::AllReduce
                                                                                   : CollectiveKind::AllGather,
                                                                               n)));
  }
  CHECK(logged == expected);
  if (world->rank() == 0) std::printf("%s", init.engine->comms_summary().c_str());
}
