// Declarations shared by the binding files of ferry._ferry: one bind_* function per file, and the conversions
// between Python values and ferry's types that several of them use.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/max_memory.h"
#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"
#include "ferry/models/config.h"

namespace ferry::python {

namespace nb = nanobind;

void bind_errors(nb::module_& m);     // errors.cc
void bind_planning(nb::module_& m);   // planning.cc
void bind_tokenizer(nb::module_& m);  // tokenizer.cc
void bind_models(nb::module_& m);     // models.cc
void bind_generate(nb::module_& m);   // generate.cc
void bind_runtime(nb::module_& m);    // runtime.cc

/// A dtype as transformers spells it ("bfloat16", "float16", "float32", torch.bfloat16) or as ferry does ("bf16").
/// None gives nullopt.
std::optional<DType> dtype_arg(nb::handle value);

/// Accelerate's max_memory dict ({0: "20GiB", "cpu": "8GiB", "disk": 10**12}) as a MaxMemory; None gives nullopt.
std::optional<MaxMemory> max_memory_arg(nb::handle value);

/// A device map dict as Accelerate writes it ({"model.embed_tokens": 0, "lm_head": "cpu"}).
DeviceMap device_map_arg(nb::handle value);
/// The reverse: GPUs as their index, the other devices by name, in the map's order.
nb::dict device_map_dict(const DeviceMap& map);

/// config.json as a path (folder or file), a dict, or JSON text.
models::ConfigJson config_arg(nb::handle value);

/// A nlohmann::json value as the equivalent Python object (through the json module).
nb::object json_to_python(const std::string& dumped);

/// Token ids from a list, a nested list, a numpy array or anything numpy.asarray takes (a CPU torch tensor): the
/// rows of a 2-D input, or one row for a 1-D one. `two_d` tells which it was.
std::vector<std::vector<int64_t>> token_rows_arg(nb::handle value, bool* two_d);

/// An f32 tensor as a numpy array that shares its memory (the array keeps the tensor alive), with `shape` (the
/// tensor's own shape when empty). Tensors on another device or dtype are copied to cpu f32 first.
nb::object tensor_to_numpy(Tensor tensor, std::vector<std::size_t> shape = {});

/// int64 ids as a numpy array of `shape` (a copy: they are small).
nb::object ids_to_numpy(const std::vector<int64_t>& ids, std::vector<std::size_t> shape);

/// A filesystem path from str or os.PathLike.
std::string path_arg(nb::handle value);

}  // namespace ferry::python
