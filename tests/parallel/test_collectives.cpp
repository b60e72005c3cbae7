// Every collective x dtype against a reference each rank computes locally from every rank's
// (deterministic) contribution. Contributions are multiples of 0.25 in [-2.75, 2.75], exact in
// every dtype and summed exactly over <= 4 ranks, so results must match bit for bit.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <numeric>

#include "mpi_test_util.h"
#include "parallel/topology.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::parallel;
using fathom::testing::error_of;
using fathom::testing::runtime;

namespace {
constexpr DType kDTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64};

double contribution(int rank, int64_t i, DType dtype) {
  const double value = static_cast<double>((rank * 7 + i * 13) % 23 - 11);
  return is_floating_point(dtype) ? value * 0.25 : value;
}

Tensor contribution_tensor(int rank, int64_t n, DType dtype, int64_t offset = 0) {
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = contribution(rank, offset + i, dtype);
  return Tensor::from_vector(values, {n}).to(dtype);
}

double reduce(ReduceOp op, int64_t i, DType dtype, int world) {
  double acc = contribution(0, i, dtype);
  for (int r = 1; r < world; ++r) {
    const double v = contribution(r, i, dtype);
    acc = op == ReduceOp::Max ? std::max(acc, v) : op == ReduceOp::Min ? std::min(acc, v) : acc + v;
  }
  return op == ReduceOp::Avg ? acc / world : acc;
}

std::vector<ReduceOp> ops_for(DType dtype) {
  if (is_floating_point(dtype)) return {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};
  return {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};
}

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("all_reduce: every op and dtype, empty to large, matches the local reference exactly", "[parallel]") {
  Communicator& world = runtime().world();
  for (DType dtype : kDTypes)
    for (ReduceOp op : ops_for(dtype))
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}}) {
        INFO(dtype_name(dtype) << " " << reduce_op_name(op) << " n=" << n);
        Tensor t = contribution_tensor(world.rank(), n, dtype);
        world.all_reduce(t, op);
        std::vector<double> expected(n);
        for (int64_t i = 0; i < n; ++i) expected[i] = reduce(op, i, dtype, world.size());
        REQUIRE(t.dtype() == dtype);
        REQUIRE(fathom::testing::mismatch(values(t), expected, 0, 0) == "");
      }
}

TEST_CASE("reduce_scatter and reduce_scatter_v: each rank gets the reduction of its shard", "[parallel]") {
  Communicator& world = runtime().world();
  const int n = world.size();
  for (DType dtype : kDTypes)
    for (ReduceOp op : ops_for(dtype)) {
      INFO(dtype_name(dtype) << " " << reduce_op_name(op));
      const int64_t shard = 5;
      Tensor input = contribution_tensor(world.rank(), shard * n, dtype);
      Tensor output = Tensor::zeros({shard}, dtype);
      world.reduce_scatter(input, output, op);
      std::vector<double> expected(shard);
      for (int64_t i = 0; i < shard; ++i) expected[i] = reduce(op, world.rank() * shard + i, dtype, n);
      REQUIRE(fathom::testing::mismatch(values(output), expected, 0, 0) == "");

      // Uneven: rank 1 gets nothing, the others r * 3 + 2 elements.
      std::vector<int64_t> counts(n);
      for (int r = 0; r < n; ++r) counts[r] = r == 1 ? 0 : r * 3 + 2;
      const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
      const int64_t offset = std::accumulate(counts.begin(), counts.begin() + world.rank(), int64_t{0});
      Tensor uneven_in = contribution_tensor(world.rank(), total, dtype);
      Tensor uneven_out = Tensor::zeros({counts[world.rank()]}, dtype);
      world.reduce_scatter_v(uneven_in, uneven_out, counts, op);
      std::vector<double> uneven_expected(counts[world.rank()]);
      for (int64_t i = 0; i < counts[world.rank()]; ++i) uneven_expected[i] = reduce(op, offset + i, dtype, n);
      REQUIRE(fathom::testing::mismatch(values(uneven_out), uneven_expected, 0, 0) == "");
    }
}

TEST_CASE("all_gather and all_gather_v concatenate the ranks' shards in rank order", "[parallel]") {
  Communicator& world = runtime().world();
  const int n = world.size();
  for (DType dtype : kDTypes) {
    INFO(dtype_name(dtype));
    const int64_t shard = 6;
    Tensor output = Tensor::zeros({shard * n}, dtype);
    world.all_gather(contribution_tensor(world.rank(), shard, dtype), output);
    std::vector<double> expected;
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < shard; ++i) expected.push_back(contribution(r, i, dtype));
    REQUIRE(fathom::testing::mismatch(values(output), expected, 0, 0) == "");

    std::vector<int64_t> counts(n);
    for (int r = 0; r < n; ++r) counts[r] = r == n - 1 ? 0 : 2 * r + 1;
    const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    Tensor gathered = Tensor::zeros({total}, dtype);
    world.all_gather_v(contribution_tensor(world.rank(), counts[world.rank()], dtype, 100), gathered, counts);
    std::vector<double> expected_v;
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < counts[r]; ++i) expected_v.push_back(contribution(r, 100 + i, dtype));
    REQUIRE(fathom::testing::mismatch(values(gathered), expected_v, 0, 0) == "");
  }
}

TEST_CASE("all_to_all: chunk r of every rank's input lands on rank r, in source-rank order", "[parallel]") {
  Communicator& world = runtime().world();
  const int n = world.size(), me = world.rank();
  for (DType dtype : kDTypes) {
    INFO(dtype_name(dtype));
    const int64_t chunk = 5;
    // Element i of the chunk for rank r from this rank: contribution(me, r * chunk + i).
    Tensor output = Tensor::zeros({chunk * n}, dtype);
    world.all_to_all(contribution_tensor(me, chunk * n, dtype), output);
    std::vector<double> expected;
    for (int from = 0; from < n; ++from)
      for (int64_t i = 0; i < chunk; ++i) expected.push_back(contribution(from, me * chunk + i, dtype));
    REQUIRE(fathom::testing::mismatch(values(output), expected, 0, 0) == "");
  }
}

TEST_CASE("broadcast from every root; barrier; all_reduce_scalar", "[parallel]") {
  Communicator& world = runtime().world();
  for (DType dtype : kDTypes)
    for (int root = 0; root < world.size(); ++root) {
      INFO(dtype_name(dtype) << " root " << root);
      Tensor t = contribution_tensor(world.rank(), 33, dtype);
      world.broadcast(t, root);
      REQUIRE(fathom::testing::mismatch(t, contribution_tensor(root, 33, dtype), 0, 0) == "");
    }
  world.barrier();
  CHECK(world.all_reduce_scalar(world.rank() + 1.0) == world.size() * (world.size() + 1) / 2.0);
  CHECK(world.all_reduce_scalar(world.rank(), ReduceOp::Max) == world.size() - 1);
}

TEST_CASE("send/recv around a ring, both directions posted at once, do not deadlock", "[parallel]") {
  Communicator& world = runtime().world();
  const int n = world.size(), me = world.rank();
  if (n == 1) return;  // no peer
  for (DType dtype : kDTypes) {
    INFO(dtype_name(dtype));
    const int64_t elements = 300000;  // large enough for Open MPI's rendezvous protocol
    Tensor to_next = contribution_tensor(me, elements, dtype);
    Tensor from_previous = Tensor::zeros({elements}, dtype);
    WorkHandle sent = world.send_async(to_next, (me + 1) % n, 7);
    WorkHandle received = world.recv_async(from_previous, (me + n - 1) % n, 7);
    sent->wait();
    received->wait();
    REQUIRE(fathom::testing::mismatch(from_previous, contribution_tensor((me + n - 1) % n, elements, dtype), 0, 0) ==
            "");
  }
}

TEST_CASE("16-bit reductions accumulate in f32 and round once", "[parallel]") {
  Communicator& world = runtime().world();
  // Rank 0 holds 1, the others 0.375 of a 16-bit ulp of 1 each. Added in 16 bits, every
  // partial sum rounds back to 1; added in f32 and rounded once, 1 + 0.375 (n-1) ulp becomes
  // 1 + 1 ulp at n = 4 (and 1 at n = 2).
  for (DType dtype : {DType::BF16, DType::F16}) {
    const double ulp = dtype == DType::BF16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
    const double mine = world.rank() == 0 ? 1.0 : 0.375 * ulp;
    Tensor t = Tensor::full({64}, mine, dtype);
    world.all_reduce(t, ReduceOp::Sum);
    const double exact_f32 = 1.0 + 0.375 * ulp * (world.size() - 1);
    const double expected = Tensor::scalar(exact_f32, DType::F32).to(dtype).item();  // one rounding
    INFO(dtype_name(dtype) << ": expected " << expected);
    REQUIRE(fathom::testing::mismatch(values(t), std::vector<double>(64, expected), 0, 0) == "");
    if (world.size() >= 4) REQUIRE(expected > 1.0);  // what 16-bit accumulation would have lost
  }
}

TEST_CASE("random f32 all_reduce matches an f64 reference within f32 rounding", "[parallel]") {
  Communicator& world = runtime().world();
  const int64_t n = 4096;
  auto sample = [](int rank, int64_t i) { return std::sin(rank * 1.7 + i * 0.37) * std::exp((i % 11) - 5.0); };
  std::vector<double> mine(n), expected(n, 0.0), magnitude(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    mine[i] = static_cast<float>(sample(world.rank(), i));
    for (int r = 0; r < world.size(); ++r) {
      expected[i] += static_cast<float>(sample(r, i));
      magnitude[i] += std::fabs(static_cast<float>(sample(r, i)));
    }
  }
  Tensor t = Tensor::from_vector(mine, {n}).to(DType::F32);
  world.all_reduce(t, ReduceOp::Sum);
  // Any f32 summation order of k terms is within (k - 1) * 2^-24 * sum |terms| of the exact sum.
  const std::vector<float> got = t.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << expected[i]);
    REQUIRE(std::fabs(got[i] - expected[i]) <= world.size() * std::ldexp(1.0, -24) * magnitude[i]);
  }
}

TEST_CASE("an async collective completes while the caller computes, without a wait", "[parallel]") {
  Communicator& world = runtime().world();
  Tensor big = Tensor::ones({1 << 20}, DType::F32);
  WorkHandle handle = world.all_reduce_async(big, ReduceOp::Sum);
  // The caller never enters MPI: completion must come from the communicator's own progress.
  // (The bound only turns a broken progress engine into a failure instead of a hang.)
  const auto start = std::chrono::steady_clock::now();
  volatile double busy = 0;
  while (!handle->test()) {
    for (int i = 0; i < 10000; ++i) busy = busy + i;
    REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(120));
  }
  handle->wait();
  CHECK(big.to_vector<float>()[12345] == static_cast<float>(world.size()));
}

TEST_CASE("collectives on several communicators issued back to back complete in order", "[parallel]") {
  Communicator& world = runtime().world();
  std::vector<Tensor> buffers;
  std::vector<WorkHandle> handles;
  for (int k = 0; k < 16; ++k) {
    buffers.push_back(Tensor::full({1000 + k}, k + world.rank(), DType::F32));
    handles.push_back(world.all_reduce_async(buffers.back(), ReduceOp::Sum));
  }
  for (auto& h : handles) h->wait();
  const double rank_sum = world.size() * (world.size() - 1) / 2.0;
  for (int k = 0; k < 16; ++k) CHECK(buffers[k].to_vector<float>()[0] == static_cast<float>(k * world.size() + rank_sum));
}

TEST_CASE("a collective group launches what it holds when it closes; waits come after", "[parallel]") {
  Communicator& world = runtime().world();
  std::vector<Tensor> buffers;
  std::vector<WorkHandle> handles;
  {
    CollectiveGroup outer(world);
    CollectiveGroup inner(world);  // groups nest; the outermost one launches
    for (int k = 0; k < 4; ++k) {
      buffers.push_back(Tensor::full({100 + k}, k + world.rank(), DType::F32));
      handles.push_back(world.all_reduce_async(buffers.back(), ReduceOp::Sum));
    }
    inner.close();
    CHECK(world.in_group());
  }
  CHECK_FALSE(world.in_group());
  for (auto& h : handles) h->wait();
  const double rank_sum = world.size() * (world.size() - 1) / 2.0;
  for (int k = 0; k < 4; ++k) CHECK(buffers[k].to_vector<float>()[99] == static_cast<float>(k * world.size() + rank_sum));
}

TEST_CASE("a blocking collective inside a collective group is refused, and nothing is issued", "[parallel]") {
  Communicator& world = runtime().world();
  const int64_t issued = world.collectives_issued();
  {
    CollectiveGroup group(world);
    CHECK(error_of([&] { world.all_reduce(Tensor::ones({3})); }) ==
          "blocking all_reduce on communicator \"world\" inside a CollectiveGroup: the group launches its "
          "collectives only when it closes, so this would wait forever; issue the async form, or close the group "
          "first");
    CHECK(error_of([&] { world.barrier(); }).find("blocking barrier") == 0);
  }
  CHECK(world.collectives_issued() == issued);
  Tensor t = Tensor::ones({3});
  world.all_reduce(t);  // the ranks still pair up
  CHECK(t.to_vector<float>()[0] == static_cast<float>(world.size()));
}

TEST_CASE("process groups: each axis's communicator holds the grid's ranks", "[parallel]") {
  parallel::Runtime& rt = runtime();
  const int tensor_size = rt.size() % 2 == 0 ? 2 : 1;
  ProcessGroups groups = rt.groups(/*pipeline=*/1, tensor_size);
  const Topology& topo = groups.topology();
  for (Axis axis : {Axis::Pipeline, Axis::Data, Axis::Tensor}) {
    Communicator& group = groups.group(axis);
    INFO(axis_name(axis));
    REQUIRE(group.size() == topo.size(axis));
    const std::vector<int> members = topo.group_of(rt.rank(), axis);
    REQUIRE(members[group.rank()] == rt.rank());
    // Gathering the world ranks over the group must give exactly the grid's members.
    Tensor mine = Tensor::full({1}, rt.rank(), DType::I32);
    Tensor all = Tensor::zeros({group.size()}, DType::I32);
    group.all_gather(mine, all);
    std::vector<int> gathered;
    for (int32_t r : all.to_vector<int32_t>()) gathered.push_back(r);
    REQUIRE(gathered == members);
  }
}

TEST_CASE("FATHOM_COMM_DEBUG cross-checks matching collectives and lets them run", "[parallel]") {
  Communicator& world = runtime().world();
  setenv("FATHOM_COMM_DEBUG", "1", 1);
  Tensor t = Tensor::ones({10}, DType::F64);
  world.all_reduce(t, ReduceOp::Sum);
  std::vector<int64_t> counts(world.size(), 2);
  Tensor gathered = Tensor::zeros({2 * world.size()}, DType::F64);
  world.all_gather_v(Tensor::ones({2}, DType::F64), gathered, counts);
  world.barrier();
  unsetenv("FATHOM_COMM_DEBUG");
  CHECK(t.to_vector<double>()[0] == world.size());
}

TEST_CASE("bad collective arguments are errors naming the problem, raised before any rank waits", "[parallel]") {
  Communicator& world = runtime().world();
  const int n = world.size();
  CHECK(error_of([&] { world.all_reduce(Tensor::ones({4}, DType::I32), ReduceOp::Avg); }) ==
        "all_reduce: avg needs a floating-point tensor, got i32; reduce with sum and divide yourself");
  CHECK(error_of([&] { world.reduce_scatter(Tensor::ones({5}), Tensor::ones({2})); }) ==
        detail::concat("reduce_scatter: the input must hold ", n, " shards of the output's 2 elements (", 2 * n,
                       "), got 5"));
  CHECK(error_of([&] { world.all_gather(Tensor::ones({3}), Tensor::ones({3 * n + 1})); }) ==
        detail::concat("all_gather: the output must hold ", n, " copies of the input's 3 elements (", 3 * n,
                       "), got ", 3 * n + 1));
  CHECK(error_of([&] { world.all_gather(Tensor::ones({3}), Tensor::ones({3 * n}, DType::F64)); }) ==
        "all_gather: input is f32 but output is f64; both must have the same dtype");
  CHECK(error_of([&] { world.all_reduce(Tensor::ones({4, 4}).transpose(0, 1)); }) ==
        "all_reduce on communicator \"world\": the input tensor must be contiguous; call .contiguous() first");
  CHECK(error_of([&] { world.broadcast(Tensor::ones({2}), n); }) ==
        detail::concat("broadcast: root ", n, " is not a rank of communicator \"world\" (size ", n, ")"));
  CHECK(error_of([&] { world.all_gather_v(Tensor::ones({1}), Tensor::ones({n}), std::vector<int64_t>(n + 1, 1)); }) ==
        detail::concat("all_gather_v: counts has ", n + 1, " entries but the communicator has ", n,
                       " ranks; give one count per rank"));
  CHECK(error_of([&] { world.send(Tensor::ones({1}), world.rank()); }) ==
        detail::concat("send: peer ", world.rank(), " must be another rank of communicator \"world\" (size ", n,
                       ", this rank ", world.rank(), ")"));
  CHECK(error_of([&] { world.all_to_all(Tensor::ones({n}), Tensor::ones({2 * n})); }) ==
        detail::concat("all_to_all: input and output must hold ", n, " equal chunks each, got ", n, " and ", 2 * n,
                       " elements"));
  CHECK(error_of([&] { world.all_reduce(Tensor::ones({2}, DType::Bool)); }) ==
        "all_reduce: bool tensors are not supported; convert to i32 first");
  // Nothing was issued by the failed calls: the next collective still pairs up.
  Tensor t = Tensor::ones({3});
  world.all_reduce(t);
  CHECK(t.to_vector<float>()[2] == static_cast<float>(n));
}
