// ferry offload -m FOLDER --offload-folder DIR — write an Accelerate-compatible offload folder (index.json +
// <name>.dat) holding the weights a plan sends to disk, plus the plan itself (device_map.json), for reuse.
#include <memory>

#include "cli.h"
#include "commands.h"
#include "ferry/core/error.h"
#include "ferry/io/checkpoint.h"
#include "ferry/io/offload.h"

namespace ferry::cli {

void add_offload_command(CLI::App& app) {
  struct Opts {
    ModelFlags flags;
    bool all = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("offload", "write an Accelerate-compatible offload folder for a model and device map");
  o->flags.add_to(*cmd);
  cmd->add_flag("--all", o->all, "offload every weight, not only those the plan sends to disk");
  cmd->callback([o] {
    const ModelFlags& f = o->flags;
    f.apply();
    if (f.offload_folder.empty())
      throw Error("no --offload-folder given", "offload", "pass --offload-folder DIR (created if missing)");
    const DType dtype = flags_dtype(f);
    const auto skeleton = build_skeleton(f.model, dtype);
    PlannedModel plan = plan_model(*skeleton, f, dtype);
    const std::filesystem::path dir = f.offload_folder;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error("cannot create the offload folder: " + ec.message(), dir.string(), "choose a writable folder");

    io::CheckpointFiles files = io::get_checkpoint_shard_files(f.model);
    io::OffloadIndex index;
    ProgressBar bar("offloading");
    LoadProgress p;
    p.shard_count = files.shards.size();
    for (const auto& shard : files.shards) p.bytes_total += std::filesystem::file_size(shard);
    int64_t written = 0;
    for (const auto& shard : files.shards) {
      ++p.shard_index;
      p.shard_name = shard.filename().string();
      io::StateDict sd = io::load_state_dict(shard);
      p.tensors_in_shard = sd.size();
      p.tensors_done = 0;
      for (const auto& [name, t] : sd) {
        auto device = plan.device_map.device_for(name);
        if (o->all || (device && device->is_disk())) {
          Tensor value = is_floating_point(t.dtype()) ? t.to(dtype) : t;
          io::offload_weight(value, name, dir, index);
          written += static_cast<int64_t>(value.nbytes());
        }
        p.bytes_done += t.nbytes();
        ++p.tensors_done;
        bar.update(p);
      }
    }
    io::save_offload_index(index, dir);
    plan.device_map.write_json_file((dir / "device_map.json").string());
    bar.finish();
    std::printf("wrote %zu tensors (%s) and index.json to %s; the plan is in %s\n", index.size(),
                format_bytes(written).c_str(), dir.string().c_str(), (dir / "device_map.json").string().c_str());
    if (index.empty())
      std::printf("note: the plan puts nothing on disk for this budget; use --all to offload every weight\n");
  });
}

}  // namespace ferry::cli
