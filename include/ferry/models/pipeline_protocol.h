// The sequence commands rank 0 of a pipeline sends the other ranks (models/pipeline.h), as bytes: what they are and
// how a follower checks them. A command is five int64s — magic, op and three arguments — some followed by tensors;
// anything that does not fit is a ferry::Error, never a read out of bounds. Header-only over core, so that the fuzz
// target (fuzz/fuzz_pipeline_messages.cc) checks exactly this code without the model layers.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/core/error.h"
#include "ferry/core/tensor.h"

namespace ferry::models::pipeline_protocol {

inline constexpr int kCommandTag = 7002;             // activations use 7100 + micro-batch (big_modeling/pipeline.cc)
inline constexpr int64_t kMagic = 0x66657272797032;  // "ferryp2": a command of this version of the protocol

enum Op : int64_t {
  kStart = 1,    // a = sequence id, b = KV cache dtype, c = tokens reserved; then the prompt (i64 [n])
  kForward = 2,  // a = rows, b = logits_to_keep, c = micro-batch; then the rows (i64 [rows, 2]: id, tokens), the ids
  kCrop = 3,     // a = sequence id, b = length
  kDrop = 4,     // a = sequence id
  kEnd = 5,
  kTimes = 6,  // the follower answers with its busy seconds (one double)
};

using Command = std::array<int64_t, 5>;  // magic, op, a, b, c

inline Error malformed(const std::string& what) {
  return Error("rank 0 sent " + what, "pipeline", "every rank must run the same ferry version");
}

/// The command's op; throws for another magic (another ferry version) or an unknown op.
inline Op op_of(const Command& c) {
  if (c[0] != kMagic) throw malformed("something that is not a pipeline command of this version");
  if (c[1] < kStart || c[1] > kTimes) throw malformed("an unknown pipeline command " + std::to_string(c[1]));
  return static_cast<Op>(c[1]);
}

/// kStart's arguments, checked: the prompt is i64 [n], n >= 1; the dtype is one a KV cache may hold.
struct Start {
  int64_t id = 0;
  DType kv_dtype = DType::F32;
  int64_t reserve_tokens = 0;
  std::vector<int64_t> prompt;
};
inline Start decode_start(const Command& c, const Tensor& prompt) {
  Start s;
  s.id = c[2];
  if (c[3] != static_cast<int64_t>(DType::F32) && c[3] != static_cast<int64_t>(DType::F16) &&
      c[3] != static_cast<int64_t>(DType::BF16))
    throw malformed("a KV cache dtype " + std::to_string(c[3]) + " that is not f32, f16 or bf16");
  s.kv_dtype = static_cast<DType>(c[3]);
  if (c[4] < 0) throw malformed("a negative number of tokens to reserve");
  s.reserve_tokens = c[4];
  if (prompt.dtype() != DType::I64 || prompt.dim() != 1 || prompt.size(0) < 1)
    throw malformed("a prompt that is not i64 [n >= 1]");
  s.prompt = prompt.to_vector<int64_t>();
  return s;
}

/// kForward's arguments, checked: the rows table is i64 [rows, 2] with rows >= 1 and tokens >= 1 each, the ids are
/// i64 [sum of tokens], logits_to_keep >= 0, the micro-batch within `max_micro_batches`.
struct Forward {
  std::vector<int64_t> ids, tokens;  // per row: sequence id, new tokens
  int64_t logits_to_keep = 0;
  int micro_batch = 0;
};
inline Forward decode_forward(const Command& c, const Tensor& table, const Tensor& input_ids, int max_micro_batches) {
  const int64_t rows = c[2];
  if (rows < 1) throw malformed("a forward over " + std::to_string(rows) + " sequences");
  if (c[3] < 0) throw malformed("a negative logits_to_keep");
  if (c[4] < 0 || c[4] >= max_micro_batches) throw malformed("micro-batch " + std::to_string(c[4]));
  if (table.dtype() != DType::I64 || table.dim() != 2 || table.size(0) != rows || table.size(1) != 2)
    throw malformed("a rows table that is not i64 [" + std::to_string(rows) + ", 2]");
  Forward f;
  f.logits_to_keep = c[3];
  f.micro_batch = static_cast<int>(c[4]);
  const std::vector<int64_t> t = table.to_vector<int64_t>();
  int64_t total = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t n = t[static_cast<std::size_t>(2 * i + 1)];
    if (n < 1 || n > (int64_t{1} << 40)) throw malformed("a row of " + std::to_string(n) + " tokens");
    f.ids.push_back(t[static_cast<std::size_t>(2 * i)]);
    f.tokens.push_back(n);
    total += n;
  }
  if (input_ids.dtype() != DType::I64 || input_ids.dim() != 1 || input_ids.size(0) != total)
    throw malformed("input ids that are not i64 [" + std::to_string(total) + "]");
  return f;
}

/// kCrop's length, checked (>= 0).
inline int64_t decode_crop_length(const Command& c) {
  if (c[3] < 0) throw malformed("a negative length to crop to");
  return c[3];
}

}  // namespace ferry::models::pipeline_protocol
