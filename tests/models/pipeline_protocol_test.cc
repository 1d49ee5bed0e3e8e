// The sequence commands rank 0 sends a pipeline's followers (models/pipeline_protocol.h): a well-formed command
// decodes to what was sent; each malformed one is a ferry::Error naming what was wrong.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/models/pipeline_protocol.h"

namespace ferry::models {
namespace {

namespace p = pipeline_protocol;

Tensor i64(std::vector<int64_t> v, Shape shape) { return Tensor::from_vector(v, std::move(shape), DType::I64); }

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one saying " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("same ferry version"), std::string::npos) << e.what();
  }
}

TEST(PipelineProtocol, CommandsDecodeToWhatWasSent) {
  EXPECT_EQ(p::op_of({p::kMagic, p::kEnd, 0, 0, 0}), p::kEnd);
  const p::Start s = p::decode_start({p::kMagic, p::kStart, 7, static_cast<int64_t>(DType::BF16), 32},
                                     i64({5, 17, 3}, {3}));
  EXPECT_EQ(s.id, 7);
  EXPECT_EQ(s.kv_dtype, DType::BF16);
  EXPECT_EQ(s.reserve_tokens, 32);
  EXPECT_EQ(s.prompt, (std::vector<int64_t>{5, 17, 3}));
  const p::Forward f = p::decode_forward({p::kMagic, p::kForward, 2, 1, 3}, i64({7, 3, 9, 1}, {2, 2}),
                                         i64({1, 2, 3, 4}, {4}), 64);
  EXPECT_EQ(f.ids, (std::vector<int64_t>{7, 9}));
  EXPECT_EQ(f.tokens, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(f.logits_to_keep, 1);
  EXPECT_EQ(f.micro_batch, 3);
  EXPECT_EQ(p::decode_crop_length({p::kMagic, p::kCrop, 7, 4, 0}), 4);
}

TEST(PipelineProtocol, MalformedCommandsAreErrors) {
  expect_error([] { p::op_of({0x66657272797031, p::kEnd, 0, 0, 0}); }, "not a pipeline command of this version");
  expect_error([] { p::op_of({p::kMagic, 99, 0, 0, 0}); }, "unknown pipeline command 99");
  expect_error(
      [] {
        p::decode_start({p::kMagic, p::kStart, 0, static_cast<int64_t>(DType::Q4_0), 0}, i64({1}, {1}));
      },
      "KV cache dtype");
  expect_error([] { p::decode_start({p::kMagic, p::kStart, 0, 0, -1}, i64({1}, {1})); }, "negative number");
  expect_error([] { p::decode_start({p::kMagic, p::kStart, 0, 0, 0}, i64({}, {0})); }, "prompt");
  expect_error([] { p::decode_start({p::kMagic, p::kStart, 0, 0, 0}, i64({1, 2}, {1, 2})); }, "prompt");
  const p::Command fwd{p::kMagic, p::kForward, 2, 1, 0};
  const Tensor table = i64({7, 3, 9, 1}, {2, 2}), ids = i64({1, 2, 3, 4}, {4});
  expect_error([&] { p::decode_forward({p::kMagic, p::kForward, 0, 1, 0}, table, ids, 64); }, "over 0 sequences");
  expect_error([&] { p::decode_forward({p::kMagic, p::kForward, 3, 1, 0}, table, ids, 64); }, "rows table");
  expect_error([&] { p::decode_forward({p::kMagic, p::kForward, 2, -1, 0}, table, ids, 64); }, "logits_to_keep");
  expect_error([&] { p::decode_forward({p::kMagic, p::kForward, 2, 1, 64}, table, ids, 64); }, "micro-batch 64");
  expect_error([&] { p::decode_forward(fwd, i64({7, 0, 9, 1}, {2, 2}), ids, 64); }, "a row of 0 tokens");
  expect_error([&] { p::decode_forward(fwd, table, i64({1, 2, 3}, {3}), 64); }, "input ids");
  expect_error([&] { p::decode_forward(fwd, table.to(DType::I32), ids, 64); }, "rows table");
  expect_error([] { p::decode_crop_length({p::kMagic, p::kCrop, 0, -2, 0}); }, "negative length");
}

}  // namespace
}  // namespace ferry::models
