// Umbrella header of the core layer.
#pragma once
#include "ferry/core/backend.h"
#include "ferry/core/convert.h"
#include "ferry/core/cpu_features.h"
#include "ferry/core/device.h"
#include "ferry/core/dtype.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/core/mapped_file.h"
#include "ferry/core/memory.h"
#include "ferry/core/storage.h"
#include "ferry/core/tensor.h"
#include "ferry/core/thread_pool.h"
