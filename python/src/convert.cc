// Conversions between Python values and ferry's types (declared in bindings.h).
#include <nanobind/stl/string.h>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "ferry/core/error.h"

namespace ferry::python {

using namespace nb::literals;

std::string path_arg(nb::handle value) {
  nb::object fspath = nb::module_::import_("os").attr("fspath");
  return nb::cast<std::string>(fspath(value));
}

std::optional<DType> dtype_arg(nb::handle value) {
  if (value.is_none()) return std::nullopt;
  if (nb::isinstance<nb::str>(value)) return parse_dtype(nb::cast<std::string>(value));
  if (nb::hasattr(value, "name") && nb::isinstance<nb::str>(value.attr("name")))  // numpy.dtype
    return parse_dtype(nb::cast<std::string>(value.attr("name")));
  return parse_dtype(nb::cast<std::string>(nb::str(value)));  // torch.bfloat16 -> "torch.bfloat16"
}

namespace {

// A dict key or value as the string MaxMemory::parse / DeviceMap::from_json expects.
std::string key_text(nb::handle key) {
  if (nb::isinstance<nb::str>(key)) return nb::cast<std::string>(key);
  if (nb::isinstance<nb::int_>(key)) return std::to_string(nb::cast<int64_t>(key));
  if (nb::hasattr(key, "type") && nb::hasattr(key, "index")) {  // torch.device
    return nb::cast<std::string>(nb::str(key));
  }
  throw Error("device key " + nb::cast<std::string>(nb::repr(key)) + " is neither an int nor a string", "max_memory",
              "use GPU indices (0, 1), \"cpu\" or \"disk\"");
}

}  // namespace

std::optional<MaxMemory> max_memory_arg(nb::handle value) {
  if (value.is_none()) return std::nullopt;
  if (!nb::isinstance<nb::dict>(value))
    throw Error("max_memory must be a dict, got " + nb::cast<std::string>(nb::repr(value.type())), "max_memory",
                "e.g. {0: \"20GiB\", \"cpu\": \"8GiB\"}");
  std::vector<std::pair<std::string, std::string>> entries;
  for (auto [k, v] : nb::borrow<nb::dict>(value)) {
    std::string size;
    if (nb::isinstance<nb::int_>(v)) size = std::to_string(nb::cast<int64_t>(v));
    else if (nb::isinstance<nb::float_>(v)) size = std::to_string(static_cast<int64_t>(nb::cast<double>(v)));
    else size = nb::cast<std::string>(nb::str(v));
    entries.emplace_back(key_text(k), size);
  }
  return MaxMemory::parse(entries);
}

DeviceMap device_map_arg(nb::handle value) {
  nlohmann::json j = nlohmann::json::object();
  for (auto [k, v] : nb::borrow<nb::dict>(value)) {
    const std::string name = nb::cast<std::string>(nb::str(k));
    if (nb::isinstance<nb::int_>(v)) j[name] = nb::cast<int64_t>(v);
    else j[name] = key_text(v);
  }
  return DeviceMap::from_json(j.dump());
}

nb::dict device_map_dict(const DeviceMap& map) {
  nb::dict out;
  for (const auto& [name, device] : map) {
    if (device.is_cuda()) out[nb::str(name.c_str())] = nb::int_(device.index);
    else out[nb::str(name.c_str())] = nb::str(device.str().c_str());
  }
  return out;
}

models::ConfigJson config_arg(nb::handle value) {
  if (nb::isinstance<nb::dict>(value)) {
    nb::object dumps = nb::module_::import_("json").attr("dumps");
    return models::ConfigJson::parse(nb::cast<std::string>(dumps(value)), "config (dict)");
  }
  if (nb::isinstance<nb::str>(value)) {
    const std::string s = nb::cast<std::string>(value);
    if (!s.empty() && s.front() == '{') return models::ConfigJson::parse(s, "config (JSON text)");
  }
  if (nb::hasattr(value, "to_dict")) {  // a transformers PretrainedConfig
    return config_arg(value.attr("to_dict")());
  }
  return models::ConfigJson::read(path_arg(value));
}

nb::object json_to_python(const std::string& dumped) {
  return nb::module_::import_("json").attr("loads")(nb::str(dumped.c_str(), dumped.size()));
}

std::vector<std::vector<int64_t>> token_rows_arg(nb::handle value, bool* two_d) {
  // A list of rows of different lengths: ferry needs no padding (each row is its own sequence).
  if ((nb::isinstance<nb::list>(value) || nb::isinstance<nb::tuple>(value)) && nb::len(value) > 0) {
    bool rows_of_lists = true;
    for (nb::handle row : value)
      rows_of_lists = rows_of_lists && (nb::isinstance<nb::list>(row) || nb::isinstance<nb::tuple>(row));
    if (rows_of_lists) {
      std::vector<std::vector<int64_t>> out;
      for (nb::handle row : value) {
        bool row_2d = false;
        std::vector<std::vector<int64_t>> one = token_rows_arg(row, &row_2d);
        if (row_2d) throw Error("each row of input_ids must be a list of token ids", "input_ids");
        out.push_back(std::move(one.front()));
      }
      if (two_d) *two_d = true;
      return out;
    }
  }
  nb::object np = nb::module_::import_("numpy");
  nb::object arr = np.attr("ascontiguousarray")(np.attr("asarray")(value), "dtype"_a = "int64");
  const auto ndim = nb::cast<std::size_t>(arr.attr("ndim"));
  if (ndim != 1 && ndim != 2)
    throw Error("input_ids must have 1 or 2 dimensions, got " + std::to_string(ndim), "input_ids",
                "pass [t0, t1, ...] or [[t0, t1, ...]]");
  auto a = nb::cast<nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>>(arr);
  const std::size_t rows = ndim == 2 ? a.shape(0) : 1;
  const std::size_t cols = ndim == 2 ? a.shape(1) : a.shape(0);
  std::vector<std::vector<int64_t>> out(rows);
  for (std::size_t r = 0; r < rows; ++r) out[r].assign(a.data() + r * cols, a.data() + (r + 1) * cols);
  if (two_d) *two_d = ndim == 2;
  return out;
}

nb::object tensor_to_numpy(Tensor tensor, std::vector<std::size_t> shape) {
  if (!tensor.device().is_cpu()) tensor = tensor.to(Device::cpu());
  if (tensor.dtype() != DType::F32) tensor = tensor.to(DType::F32);
  if (shape.empty())
    for (int64_t d : tensor.shape()) shape.push_back(static_cast<std::size_t>(d));
  auto* owner = new Tensor(std::move(tensor));
  nb::capsule keep(owner, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  nb::ndarray<nb::numpy, float> array(owner->data<float>(), shape.size(), shape.data(), keep);
  return nb::cast(array, nb::rv_policy::reference);
}

nb::object ids_to_numpy(const std::vector<int64_t>& ids, std::vector<std::size_t> shape) {
  auto* owner = new std::vector<int64_t>(ids);
  nb::capsule keep(owner, [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
  nb::ndarray<nb::numpy, int64_t> array(owner->data(), shape.size(), shape.data(), keep);
  return nb::cast(array, nb::rv_policy::reference);
}

}  // namespace ferry::python
