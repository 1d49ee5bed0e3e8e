// ferry's version: `ferry --version`, and what the ranks of a pipeline compare at start (models/pipeline.h).
#pragma once

#include <string_view>

namespace ferry {

inline constexpr std::string_view kVersion = "0.1.0";

}  // namespace ferry
