#include "ferry/core/dtype.h"

#include <gtest/gtest.h>

#include "ferry/core/error.h"

namespace ferry {
namespace {

TEST(DType, SizesInStorageAndPlanning) {
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F8_E4M3FN), 1u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  // Accelerate: dtype_byte_size — bool 1/8, fp16 2, fp32 4, fp64 8, fp8 1.
  EXPECT_DOUBLE_EQ(dtype_byte_size(DType::Bool), 0.125);
  EXPECT_DOUBLE_EQ(dtype_byte_size(DType::F16), 2);
  EXPECT_DOUBLE_EQ(dtype_byte_size(DType::F32), 4);
  EXPECT_DOUBLE_EQ(dtype_byte_size(DType::F64), 8);
  EXPECT_DOUBLE_EQ(dtype_byte_size(DType::F8_E5M2), 1);
}

TEST(DType, NamesRoundTripInEveryFormat) {
  for (DType t : kAllDTypes) {
    EXPECT_EQ(dtype_from_safetensors(safetensors_dtype_name(t)), t);
    EXPECT_EQ(dtype_from_numpy(numpy_dtype_name(t)), t);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
    EXPECT_EQ(parse_dtype(safetensors_dtype_name(t)), t);
    EXPECT_EQ(parse_dtype(numpy_dtype_name(t)), t);
  }
  EXPECT_EQ(safetensors_dtype_name(DType::F8_E4M3FN), "F8_E4M3");
  EXPECT_EQ(numpy_dtype_name(DType::BF16), "bfloat16");
  EXPECT_EQ(parse_dtype("torch.float16"), DType::F16);
  EXPECT_EQ(parse_dtype("half"), DType::F16);
  EXPECT_EQ(parse_dtype("BF16"), DType::BF16);
}

TEST(DType, UnknownNamesAreErrorsListingTheValidOnes) {
  EXPECT_FALSE(dtype_from_safetensors("F4"));
  EXPECT_FALSE(dtype_from_numpy("complex64"));
  try {
    parse_dtype("float4");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown dtype 'float4'"), std::string::npos);
    EXPECT_NE(e.hint().find("bf16"), std::string::npos);
  }
}

TEST(DType, Classification) {
  EXPECT_TRUE(is_floating_point(DType::BF16));
  EXPECT_TRUE(is_floating_point(DType::F8_E5M2));
  EXPECT_FALSE(is_floating_point(DType::I64));
  EXPECT_FALSE(is_floating_point(DType::Bool));
  EXPECT_TRUE(is_fp8(DType::F8_E4M3FN));
  EXPECT_FALSE(is_fp8(DType::F16));
}

}  // namespace
}  // namespace ferry
