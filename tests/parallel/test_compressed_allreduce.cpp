// The 1-bit compressed all-reduce: sign packing round-trips (0 counts as +), the error-feedback
// invariant holds at every call, uneven sizes are padded, and the bytes sent are about 1/32 of
// an f32 all-reduce's.
#include <cmath>

#include "core/generator.h"
#include "mpi_test_util.h"
#include "parallel/comms_logger.h"
#include "parallel/compressed_allreduce.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::parallel;
using fathom::testing::runtime;

TEST_CASE("signs pack 32 to a word and unpack to ±scale; zero is positive", "[onebit]") {
  std::vector<float> values(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = (i % 3 == 0) ? 0.0f : (i % 3 == 1 ? 1.5f : -2.0f);
  const Tensor words = pack_signs(Tensor::from_vector(values, {64}));
  REQUIRE(words.numel() == 2);
  std::vector<float> decoded(64);
  unpack_signs(words, 0.25f, decoded.data(), 64);
  for (size_t i = 0; i < values.size(); ++i) CHECK(decoded[i] == (values[i] >= 0 ? 0.25f : -0.25f));
  CHECK(compressed_length(1, 3) == 96);
  CHECK(compressed_length(96, 3) == 96);
  CHECK(compressed_length(97, 3) == 192);
  CHECK_THROWS_WITH(pack_signs(Tensor::zeros({33})), Catch::Contains("a multiple of 32"));
}

namespace {
// The whole server error: every rank's chunk in rank order.
std::vector<double> gathered(Communicator& comm, const Tensor& chunk) {
  Tensor all = Tensor::empty({chunk.numel() * comm.size()});
  comm.all_gather(chunk, all);
  const Tensor f64 = all.to(DType::F64);
  const double* p = static_cast<const double*>(f64.raw_data());
  return std::vector<double>(p, p + all.numel());
}

std::vector<double> mean_over_ranks(Communicator& comm, const Tensor& x) {
  Tensor sum = x.to(DType::F64).clone();
  comm.all_reduce(sum);
  const double* p = static_cast<const double*>(sum.raw_data());
  std::vector<double> out(p, p + sum.numel());
  for (double& v : out) v /= comm.size();
  return out;
}
}  // namespace

TEST_CASE("error feedback: output + mean worker error + server error is conserved at every call", "[onebit]") {
  Communicator& world = runtime().world();
  const int n = world.size();
  for (int64_t numel : {int64_t{1000}, int64_t{32} * n, int64_t{7}}) {  // uneven, exact, smaller than a word
    INFO(numel << " elements over " << n << " ranks");
    const int64_t length = compressed_length(numel, n);
    CompressionErrors errors = CompressionErrors::zeros(numel, n);
    Generator gen(100 + world.rank());
    for (int call = 0; call < 5; ++call) {
      const Tensor input = uniform({numel}, gen, -1.0, 1.0);
      std::vector<double> before = mean_over_ranks(world, errors.worker);
      const std::vector<double> server_before = gathered(world, errors.server);
      const std::vector<double> mean_input = mean_over_ranks(world, input);
      Tensor buffer = input.clone();
      compressed_all_reduce(world, buffer, errors);
      REQUIRE(buffer.numel() == numel);
      const std::vector<double> after = mean_over_ranks(world, errors.worker);
      const std::vector<double> server_after = gathered(world, errors.server);
      const Tensor out64 = buffer.to(DType::F64);
      const double* out = static_cast<const double*>(out64.raw_data());
      double worst = 0;
      for (int64_t i = 0; i < length; ++i) {
        const double output = i < numel ? out[i] : 0.0;  // the padding's output is dropped
        const double input_mean = i < numel ? mean_input[i] : 0.0;
        const double lhs = output + after[i] + server_after[i];
        const double rhs = input_mean + before[i] + server_before[i];
        if (i < numel) worst = std::max(worst, std::fabs(lhs - rhs));
      }
      CHECK(worst < 1e-5);
      // Every rank ends with the same output.
      Tensor max = buffer.clone(), min = buffer.clone();
      world.all_reduce(max, ReduceOp::Max);
      world.all_reduce(min, ReduceOp::Min);
      FATHOM_REQUIRE_CLOSE(max, min, 0.0, 0.0);
    }
  }
}

TEST_CASE("a compressed all-reduce sends about 1/32 of the bytes of an f32 one", "[onebit]") {
  Communicator& world = runtime().world();
  const int n = world.size();
  constexpr int64_t kNumel = 1 << 16;
  auto logger = std::make_shared<CommsLogger>(CommsLoggerOptions{});
  CompressionErrors errors = CompressionErrors::zeros(kNumel, n);
  {
    CollectiveObservation watching(logger);
    Tensor buffer = Tensor::full({kNumel}, 0.5);
    compressed_all_reduce(world, buffer, errors);
  }
  int64_t bytes = 0;
  for (const CommsRow& row : logger->rows()) bytes += row.bytes * row.count;
  // The signs of the padded length twice (all-to-all, then the chunks' all-gather) and 2·n scales.
  CHECK(bytes == 2 * compressed_length(kNumel, n) / 8 + 2 * n * 4);
  CHECK(static_cast<double>(bytes) < 4.0 * kNumel / 15);  // under 1/15 of the f32 message
}

TEST_CASE("several buffers in one exchange give what one call per buffer gives", "[onebit]") {
  Communicator& world = runtime().world();
  const int n = world.size();
  Generator gen(7 + world.rank());
  const std::vector<int64_t> sizes = {1000, 37, 32 * n};
  std::vector<Tensor> together, apart;
  std::vector<CompressionErrors> errors_together, errors_apart;
  for (int64_t size : sizes) {
    const Tensor x = uniform({size}, gen, -1.0, 1.0);
    together.push_back(x.clone());
    apart.push_back(x.clone());
    errors_together.push_back(CompressionErrors::zeros(size, n));
    errors_apart.push_back(CompressionErrors::zeros(size, n));
  }
  for (int call = 0; call < 3; ++call) {
    std::vector<CompressionErrors*> pointers;
    for (CompressionErrors& e : errors_together) pointers.push_back(&e);
    compressed_all_reduce(world, together, pointers);
    for (size_t t = 0; t < sizes.size(); ++t) compressed_all_reduce(world, apart[t], errors_apart[t]);
    for (size_t t = 0; t < sizes.size(); ++t) {
      INFO("buffer " << t << ", call " << call);
      FATHOM_REQUIRE_CLOSE(together[t], apart[t], 0.0, 0.0);
      FATHOM_REQUIRE_CLOSE(errors_together[t].worker, errors_apart[t].worker, 0.0, 0.0);
    }
  }
}
