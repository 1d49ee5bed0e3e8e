// Umbrella header of the ops layer: every kernel a transformer forward pass needs.
#pragma once
#include "ferry/ops/attention.h"
#include "ferry/ops/elementwise.h"
#include "ferry/ops/gather.h"
#include "ferry/ops/linear.h"
#include "ferry/ops/norm.h"
#include "ferry/ops/rotary.h"
