// summarize_model: config.json + checkpoint headers -> the facts `ferry inspect` prints.
#include "ferry/models/model_summary.h"

#include <algorithm>
#include <map>

#include "ferry/io/safetensors.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/empty_weights.h"

namespace ferry::models {

namespace {

void add_tensor(ModelSummary& s, CheckpointShardInfo& shard, std::string name, DType dtype, Shape shape) {
  CheckpointTensorInfo t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.nbytes = dtype_nbytes(dtype, shape_numel(shape));
  t.shape = std::move(shape);
  t.file = shard.file;
  shard.tensor_count += 1;
  shard.tensor_bytes += t.nbytes;
  s.tensors.push_back(std::move(t));
}

}  // namespace

ModelSummary summarize_model(const std::filesystem::path& folder) {
  const ConfigJson config = ConfigJson::read(folder);
  const io::CheckpointFiles files = io::get_checkpoint_shard_files(folder);
  ModelSummary s;
  s.folder = folder;
  s.config_dtype = config.dtype();
  s.format = files.format;
  s.sharded = files.index_file.has_value();

  std::shared_ptr<nn::Module> skeleton;
  {
    auto guard = nn::init_empty_weights();
    const DType dtype = resolve_dtype(config, std::nullopt);
    if (is_seq2seq_config(config)) {
      auto m = AutoModelForSeq2SeqLM::from_config(config, dtype);
      // The encoder's layer count; the decoder's is in the tensor list.
      s.info = m->model_info();
      s.layers_prefix = "encoder.block";
      s.num_layers = m->info().num_layers;
      skeleton = m;
    } else {
      auto m = AutoModelForCausalLM::from_config(config, dtype);
      s.info = m->model_info();
      s.layers_prefix = m->info().layers_prefix;
      s.num_layers = m->info().num_hidden_layers();
      skeleton = m;
    }
  }
  for (const auto& [name, tensor] : skeleton->named_parameters()) s.parameter_count += tensor.numel();

  for (const auto& path : files.shards) {
    CheckpointShardInfo shard;
    shard.file = path.filename().string();
    shard.file_bytes = std::filesystem::file_size(path);
    if (files.format == io::CheckpointFormat::Safetensors) {
      const io::SafetensorsFile f = io::SafetensorsFile::open(path);
      for (const io::SafetensorsEntry& e : f.entries()) add_tensor(s, shard, e.name, e.dtype, e.shape);
    } else {
      for (const auto& [name, tensor] : io::load_state_dict(path)) add_tensor(s, shard, name, tensor.dtype(), tensor.shape());
    }
    s.shards.push_back(std::move(shard));
  }

  std::map<DType, int64_t> per_dtype;
  for (const CheckpointTensorInfo& t : s.tensors) {
    const int64_t n = shape_numel(t.shape);
    s.checkpoint_elements += n;
    per_dtype[t.dtype] += n;
  }
  s.stored_dtypes.assign(per_dtype.begin(), per_dtype.end());
  std::stable_sort(s.stored_dtypes.begin(), s.stored_dtypes.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

}  // namespace ferry::models
