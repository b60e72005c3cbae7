#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "engine/rlhf/preference_data.h"
#include "engine/rlhf/batches.h"

using namespace fathom;

TEST_CASE("the built-in sorting pairs prefer the sorted answer, and the true metric knows it", "[rlhf][data]") {
  const auto pairs = sorting_preference_pairs(200, 4);
  REQUIRE(pairs.size() == 200);
  CHECK(sorting_preference_pairs(200, 4)[17].prompt == pairs[17].prompt);  // reproducible from the seed
  for (size_t i = 0; i < pairs.size(); ++i) {
    const PreferencePair& p = pairs[i];
    INFO(p.prompt << " / " << p.chosen << " / " << p.rejected);
    REQUIRE(p.prompt.size() == 10);  // one length: batched generation needs equal prompts
    CHECK(std::is_sorted(p.chosen.begin(), p.chosen.begin() + 4));
    CHECK(p.chosen.back() == '\n');
    CHECK(p.rejected != p.chosen);
    CHECK(sortedness(p.chosen) == 1.0);
    CHECK(sortedness(p.rejected) < 1.0);
    CHECK(keeps_digits(p.prompt, p.chosen));
    // Rejections cycle: another ordering of the prompt's digits, any digits out of order, letters.
    if (i % 3 == 0) CHECK(keeps_digits(p.prompt, p.rejected));
    if (i % 3 == 2) CHECK(sortedness(p.rejected) == 0.0);
  }
  CHECK(sortedness("1234\nanything") == 1.0);
  CHECK(sortedness("4321\n") == 0.0);
  CHECK(sortedness("1243\n") == Approx(2.0 / 3));
  CHECK(sortedness("1135\n") == 1.0);  // ascending, whatever the digits
  CHECK(sortedness("12") == 0.0);
  CHECK(sortedness("12a4") == 0.0);
  CHECK(keeps_digits("sort 3142:", "4321\n"));
  CHECK_FALSE(keeps_digits("sort 3142:", "1235\n"));
  CHECK_FALSE(keeps_digits("sort 3142:", "123"));
  CHECK_THROWS_WITH(keeps_digits("hello", "1234"), Catch::Contains("not a prompt of the built-in task"));
}

TEST_CASE("preference JSON Lines: read, and every bad line named", "[rlhf][data]") {
  const std::string path = "preference_test.jsonl";
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("{\"prompt\": \"Human: hi\", \"chosen\": \" Assistant: hello\", \"rejected\": \" Assistant: go away\", "
        "\"extra\": 1}\n\n{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n");
  const auto pairs = read_preference_jsonl(path);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].chosen == " Assistant: hello");
  CHECK(pairs[1].rejected == "c");
  write("{\"prompt\": \"a\", \"chosen\": \"b\"}\n");
  CHECK_THROWS_WITH(read_preference_jsonl(path), Catch::Contains("preference_test.jsonl:1: no \"rejected\""));
  write("{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n{\"prompt\": 3, \"chosen\": \"b\", \"rejected\": \"c\"}\n");
  CHECK_THROWS_WITH(read_preference_jsonl(path), Catch::Contains("preference_test.jsonl:2: \"prompt\" is a number, not a string (text) or an array of token ids"));
  // Token ids, tokenized beforehand: one kind per file, integers >= 0.
  write("{\"prompt\": [5, 6], \"chosen\": [7], \"rejected\": [8, 9]}\n");
  const auto tokenized = read_preference_jsonl(path);
  REQUIRE(tokenized.size() == 1);
  CHECK(tokenized[0].tokenized());
  CHECK(tokenized[0].rejected_ids == std::vector<int64_t>{8, 9});
  write("{\"prompt\": [5, 6], \"chosen\": [7], \"rejected\": [8]}\n{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n");
  CHECK_THROWS_WITH(read_preference_jsonl(path), Catch::Contains("preference_test.jsonl:2: \"prompt\" is text but the "
                                                                 "file's first line is token ids; use one kind throughout"));
  write("{\"prompt\": [5, -1], \"chosen\": [7], \"rejected\": [8]}\n");
  CHECK_THROWS_WITH(read_preference_jsonl(path), Catch::Contains("\"prompt\" holds a number -1; token ids are integers >= 0"));
  write("{\"prompt\": [], \"chosen\": [7], \"rejected\": [8]}\n");
  CHECK_THROWS_WITH(read_preference_jsonl(path), Catch::Contains("\"prompt\" has no token ids"));
  write("[1, 2]\n");
  CHECK_THROWS_WITH(read_preference_jsonl(path), Catch::Contains("expected a JSON object"));
  write("{not json\n");
  CHECK_THROWS_WITH(read_preference_jsonl(path), Catch::Contains("preference_test.jsonl:1"));
  write("");
  CHECK_THROWS_WITH(read_preference_jsonl(path), Catch::Contains("no pairs"));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(read_preference_jsonl(path), Catch::Contains("cannot open the file"));
}

TEST_CASE("SFT batches put the loss on the response only; reward batches pad both sides alike", "[rlhf][data]") {
  const std::vector<PreferencePair> pairs = {{"ab:", "xy\n", "yx\n"}, {"cd:", "z\n", "zzz\n"}};
  const SftBatch sft = sft_batch(pairs, 64);
  // Row 0: "ab:xy\n" -> inputs "ab:xy", targets: b and : are the prompt's (ignored), then x y \n.
  REQUIRE(sft.inputs.sizes() == Shape{2, 5});
  CHECK(sft.inputs.to_vector<int64_t>() == std::vector<int64_t>{'a', 'b', ':', 'x', 'y', 'c', 'd', ':', 'z', 0});
  CHECK(sft.targets.to_vector<int64_t>() ==
        std::vector<int64_t>{-100, -100, 'x', 'y', '\n', -100, -100, 'z', '\n', -100});
  const RewardBatch reward = reward_batch(pairs, 64);
  REQUIRE(reward.chosen.sizes() == Shape{2, 7});  // the longest: "cd:zzz\n"
  CHECK(reward.rejected.to_vector<int64_t>()[7 + 6] == '\n');
  CHECK(reward.chosen.to_vector<int64_t>()[7 + 5] == 0);  // padding
  CHECK(reward_batch(pairs, 4).chosen.sizes() == Shape{2, 4});  // cut at max_length
  CHECK(prompt_batch(pairs).to_vector<int64_t>() == std::vector<int64_t>{'a', 'b', ':', 'c', 'd', ':'});
  CHECK_THROWS_WITH(prompt_batch({{"a:", "x", "y"}, {"bb:", "x", "y"}}), Catch::Contains("prompts of 2 and 3 tokens"));
  CHECK_THROWS_WITH(sft_batch({{std::string("a\0", 2), "x", "y"}}, 8), Catch::Contains("NUL byte"));
}

TEST_CASE("token-id pairs batch like text, padded with the id the caller names", "[rlhf][data]") {
  PreferencePair pair;
  pair.prompt_ids = {300, 301}, pair.chosen_ids = {400, 401}, pair.rejected_ids = {402};
  const SftBatch sft = sft_batch({pair}, 64, 511);
  CHECK(sft.inputs.to_vector<int64_t>() == std::vector<int64_t>{300, 301, 400});
  CHECK(sft.targets.to_vector<int64_t>() == std::vector<int64_t>{-100, 400, 401});
  const RewardBatch reward = reward_batch({pair}, 64, 511);
  CHECK(reward.rejected.to_vector<int64_t>() == std::vector<int64_t>{300, 301, 402, 511});
  CHECK(prompt_batch({pair}, 511).to_vector<int64_t>() == std::vector<int64_t>{300, 301});
  CHECK(same_length_batches({pair, pair, pair}, 2, 8).size() == 1);  // by token count; a remainder left out
  CHECK(same_length_batches({pair}, 1, 1).empty());                   // too long for the room left
  CHECK_THROWS_WITH(sft_batch({pair}, 64, 401), Catch::Contains("contains the pad token 401; pad with an id the data "
                                                                "does not use"));
}
