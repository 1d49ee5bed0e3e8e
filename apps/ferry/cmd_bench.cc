// ferry bench -m FOLDER — llama-bench-like throughput table: prompt processing (pp) and text generation (tg),
// the latter also for batches of sequences decoded together (--batch 1,8,32).
#include <chrono>
#include <cmath>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "bench_disk.h"
#include "cli.h"
#include "commands.h"
#include "disk_io_report.h"
#include "ferry/core/backend.h"
#include "ferry/models/kv_cache.h"
#include "run_model.h"

namespace ferry::cli {
namespace {

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Tensor random_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<int64_t>(rng() % static_cast<uint32_t>(vocab));
  return Tensor::from_vector(v, {n});
}

struct Stat {
  double mean = 0, sd = 0;
};
Stat stat(const std::vector<double>& xs) {
  Stat s;
  for (double x : xs) s.mean += x;
  s.mean /= static_cast<double>(xs.size());
  for (double x : xs) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = xs.size() > 1 ? std::sqrt(s.sd / static_cast<double>(xs.size() - 1)) : 0;
  return s;
}

// An encoder-decoder model: "enc" = the encoder over pp input tokens (tokens/s), "tg" = the decoder generating tg
// tokens one per forward against that encoder output.
void bench_seq2seq(LoadedModel& lm, int64_t pp, int64_t tg, int64_t reps, bool json) {
  auto& model = dynamic_cast<models::Seq2SeqLM&>(*lm.model);
  const int64_t vocab = model.info().vocab_size, input = pp > 0 ? pp : 64;
  model.encode(random_ids(4, vocab, 7));  // warm-up, as for decoder-only models
  std::vector<std::pair<std::string, Stat>> rows;
  std::vector<double> enc_tps, dec_tps;
  for (int64_t r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    const Tensor enc = model.encode(random_ids(input, vocab, static_cast<uint32_t>(r))).to(Device::cpu());
    enc_tps.push_back(static_cast<double>(input) / seconds(t0));
    if (tg == 0) continue;
    auto cache = model.make_cache();
    const Tensor ids = random_ids(tg, vocab, static_cast<uint32_t>(100 + r));
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < tg; ++i) model.decode(ids.slice(i, i + 1), enc, cache, 1).to(Device::cpu());
    dec_tps.push_back(static_cast<double>(tg) / seconds(t0));
  }
  if (pp > 0) rows.push_back({"enc" + std::to_string(pp), stat(enc_tps)});
  if (tg > 0) rows.push_back({"tg" + std::to_string(tg), stat(dec_tps)});
  int64_t bytes = 0;
  for (const auto& e : lm.usage.entries()) bytes += e.bytes;
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& [test, st] : rows)
      j.push_back({{"model", lm.architecture},
                   {"size_bytes", bytes},
                   {"test", test},
                   {"t_s_mean", st.mean},
                   {"t_s_sd", st.sd},
                   {"repetitions", reps},
                   {"dtype", std::string(dtype_name(lm.dtype))},
                   {"batch", 1},
                   {"cpu_kernels", cpu_kernels_description()}});
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::vector<std::vector<std::string>> table{{"model", "size", "test", "t/s"}};
  for (const auto& [test, st] : rows)
    table.push_back({lm.architecture + " " + std::string(dtype_name(lm.dtype)), format_bytes(bytes), test,
                     fmt::format("{:.2f} ± {:.2f}", st.mean, st.sd)});
  print_table(stdout, table);
  std::printf("cpu kernels: %s\n", cpu_kernels_description().c_str());
}

struct BenchOptions {
  ModelFlags flags;
  int64_t pp = 512, tg = 128, reps = 5;
  std::string batch = "1";
  bool json = false;
  bool disk = false;
};

// One result of a decoder-only model: pp (prefill), or tg (decode) at one batch size.
struct Row {
  std::string test;
  Stat tps;
  int64_t batch = 1;
};

// A decoder-only model's results, with what the JSON and the table say of the model beside them.
struct DecoderResults {
  std::vector<Row> rows;
  // Host→device traffic of the batch-1 decode runs (offloaded weights streamed to a GPU), per token and per second.
  double h2d_per_token = 0, h2d_gb_per_s = 0;
  int64_t params = 0, bytes = 0;
  std::string map_desc;  // planned weight bytes per device, "+"-joined
  DiskIoReport disk_io;  // the tg runs' disk reads, per forward
};

// Untimed forwards first (the whole prompt, then one token): the first touch of mmap'd weights (page faults, or
// disk reads into the page cache), of the allocator's pools and of a GPU's GEMM library (cuBLAS picks its kernels
// per shape on first use: the first pp512 run on an H200 was 3x slower, and still 1.5x after a 32-token warm-up)
// is a load cost, not throughput.
void warm_up(models::CausalLM& model, int64_t pp, int64_t vocab) {
  if (pp > 0) model.logits(random_ids(pp, vocab, 6), model.make_cache(), 1).to(Device::cpu());
  model.logits(random_ids(1, vocab, 7), model.make_cache(), 1).to(Device::cpu());
}

// pp: the whole prompt in one forward, tokens/s.
Row prefill_row(models::CausalLM& model, int64_t pp, int64_t reps, int64_t vocab) {
  std::vector<double> tps;
  for (int64_t r = 0; r < reps; ++r) {
    auto cache = model.make_cache();
    Tensor ids = random_ids(pp, vocab, static_cast<uint32_t>(r));
    auto t0 = std::chrono::steady_clock::now();
    model.logits(ids, cache, 1).to(Device::cpu());  // read back: a GPU's kernels have finished
    tps.push_back(static_cast<double>(pp) / seconds(t0));
  }
  return {"pp" + std::to_string(pp), stat(tps)};
}

// Repetition `r` of the tg test for `batch` sequences: the seconds to decode tg tokens of each.
double time_decode(models::CausalLM& model, int64_t batch, int64_t tg, int64_t vocab, int64_t r) {
  std::vector<std::shared_ptr<models::KvCache>> caches;
  std::vector<Tensor> ids;
  for (int64_t b = 0; b < batch; ++b) {
    caches.push_back(model.make_cache());
    ids.push_back(random_ids(tg, vocab, static_cast<uint32_t>(100 + r * 1000 + b)));
  }
  auto t0 = std::chrono::steady_clock::now();
  // Each step's logits are read back, as generation does to pick the next token; a batch runs one forward
  // for all its sequences (each with its own cache), as text::BatchGenerator does.
  for (int64_t i = 0; i < tg; ++i) {
    if (batch == 1) {
      model.logits(ids[0].slice(i, i + 1), caches[0], 1).to(Device::cpu());
      continue;
    }
    std::vector<int64_t> step;
    std::vector<models::KvCacheBatch::Sequence> seqs;
    for (int64_t b = 0; b < batch; ++b) {
      step.push_back(ids[static_cast<std::size_t>(b)].data<int64_t>()[i]);
      seqs.push_back({caches[static_cast<std::size_t>(b)], 1});
    }
    model.logits(Tensor::from_vector(step, {batch}), models::KvCacheBatch(std::move(seqs)), 1).to(Device::cpu());
  }
  return seconds(t0);
}

// tg: a row per batch size (the total tokens/s of the batch), and the host→device traffic of batch 1.
void add_decode_rows(models::CausalLM& model, const std::vector<int64_t>& batches, int64_t tg, int64_t reps,
                     int64_t vocab, DecoderResults& res) {
  if (tg <= 0) return;
  for (int64_t batch : batches) {
    std::vector<double> tps;
    double decode_s = 0;
    const uint64_t h2d_before = transfer_stats().host_to_device;
    for (int64_t r = 0; r < reps; ++r) {
      const double s = time_decode(model, batch, tg, vocab, r);
      decode_s += s;
      tps.push_back(static_cast<double>(tg * batch) / s);
    }
    res.rows.push_back({"tg" + std::to_string(tg) + (batch > 1 ? " b" + std::to_string(batch) : ""), stat(tps), batch});
    if (batch == 1) {
      const double moved = static_cast<double>(transfer_stats().host_to_device - h2d_before);
      res.h2d_per_token = moved / static_cast<double>(tg * reps);
      res.h2d_gb_per_s = decode_s > 0 ? moved / decode_s / 1e9 : 0;
    }
  }
}

void print_decoder_json(const DecoderResults& res, const LoadedModel& lm, const std::string& architecture,
                        const BenchOptions& o) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& r : res.rows)
    j.push_back({{"model", architecture},
                 {"size_bytes", res.bytes},
                 {"params", res.params},
                 {"device_map", res.map_desc},
                 {"test", r.test},
                 {"t_s_mean", r.tps.mean},
                 {"t_s_sd", r.tps.sd},
                 {"repetitions", o.reps},
                 {"dtype", std::string(dtype_name(lm.dtype))},
                 {"batch", r.batch},
                 {"prefetch", prefetch_name(o.flags.prefetch)},
                 {"cpu_kernels", cpu_kernels_description()},
                 {"weights_bytes", res.bytes},
                 {"streamed_bytes_per_token", lm.streamed_bytes_per_forward}});
  for (auto& row : j)
    if (row["test"].get<std::string>().rfind("tg", 0) == 0 && row["batch"] == 1) {
      row["h2d_bytes_per_token"] = res.h2d_per_token;
      row["h2d_gb_per_s"] = res.h2d_gb_per_s;
      row["disk_io"] = disk_io_json(res.disk_io);  // over every tg run, per forward
    }
  std::printf("%s\n", j.dump(2).c_str());
}

void print_decoder_table(const DecoderResults& res, const LoadedModel& lm, const std::string& architecture,
                         bool batched) {
  // Batched rows: the speed-up over batch 1 (the same bytes of weights serve `batch` tokens per step).
  double tg1 = 0;
  for (const auto& r : res.rows)
    if (r.test.rfind("tg", 0) == 0 && r.batch == 1) tg1 = r.tps.mean;
  std::vector<std::vector<std::string>> table{{"model", "size", "params", "device map", "test", "t/s"}};
  if (batched) table[0].push_back("× b1");
  for (const auto& r : res.rows) {
    table.push_back({architecture + " " + std::string(dtype_name(lm.dtype)), format_bytes(res.bytes),
                     fmt::format("{:.2f} B", res.params / 1e9), res.map_desc, r.test,
                     fmt::format("{:.2f} ± {:.2f}", r.tps.mean, r.tps.sd)});
    if (batched)
      table.back().push_back(r.test.rfind("tg", 0) == 0 && tg1 > 0 ? fmt::format("{:.2f}", r.tps.mean / tg1) : "");
  }
  print_table(stdout, table);
  std::printf("cpu kernels: %s\n", cpu_kernels_description().c_str());
  if (res.h2d_per_token > 0)
    std::printf("host→device during tg: %s per token, %.2f GB/s\n",
                format_bytes(static_cast<int64_t>(res.h2d_per_token)).c_str(), res.h2d_gb_per_s);
  if (const std::string io = disk_io_text(res.disk_io); !io.empty())
    std::printf("during tg (per forward): %s\n", io.c_str());
}

// A decoder-only model: "pp" = a prefill of the whole prompt (tokens/s), "tg" = decoding one token per forward, for
// each batch size.
void bench_decoder(LoadedModel& lm, const BenchOptions& o, const std::vector<int64_t>& batches) {
  auto& model = dynamic_cast<models::CausalLM&>(*lm.model);
  const int64_t vocab = model.info().vocab_size;
  DecoderResults res;
  for (const auto& e : lm.usage.entries()) res.bytes += e.bytes;
  for (auto& [name, t] : model.named_parameters()) res.params += t.numel();
  for (const auto& e : lm.usage.entries())
    res.map_desc += (res.map_desc.empty() ? "" : "+") + e.device.str() + ":" + format_bytes(e.bytes);
  warm_up(model, o.pp, vocab);
  if (o.pp > 0) res.rows.push_back(prefill_row(model, o.pp, o.reps, vocab));
  const DiskIoMark io_before = disk_io_mark(lm);
  const auto t0 = std::chrono::steady_clock::now();
  add_decode_rows(model, batches, o.tg, o.reps, vocab, res);
  const auto forwards = static_cast<std::size_t>(
      std::max<int64_t>(o.tg * o.reps * static_cast<int64_t>(batches.size()), 1));
  res.disk_io = disk_io_report(lm, io_before, forwards, seconds(t0));
  if (o.json) return print_decoder_json(res, lm, model.info().architecture, o);
  print_decoder_table(res, lm, model.info().architecture, batches.size() > 1 || batches[0] > 1);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "throughput: prompt processing (pp) and generation (tg), mean ± sd over -r runs");
  o->flags.add_to(*cmd);
  cmd->add_option("-p,--n-prompt", o->pp, "prompt tokens for the pp test (default 512; 0 skips)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--n-gen", o->tg, "tokens for the tg test (default 128; 0 skips)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-r,--repetitions", o->reps, "runs per test (default 5)")->check(CLI::PositiveNumber);
  cmd->add_option("-b,--batch", o->batch,
                  "sequences decoded together in the tg test, a list: 1,8,32 adds a row per size with the total "
                  "tokens/s of the batch (default 1)");
  cmd->add_flag("--json", o->json, "print the results as JSON");
  cmd->add_flag("--disk", o->disk,
                "instead: measure the O_DIRECT read bandwidth of the disk holding -m's weights over request size × "
                "queue depth, and cache it (runs report their reads against it and read with its best point)");
  cmd->callback([o] {
    if (o->disk) return bench_disk(o->flags.model, o->json);
    std::vector<int64_t> batches = parse_int_list(o->batch, "--batch");
    for (int64_t b : batches)
      if (b < 1) throw Error("batch sizes must be at least 1, got " + std::to_string(b), "--batch");
    LoadedModel lm = load_for_run(o->flags, o->json ? nullptr : stderr);
    // The tests differ by kind: an encoder's throughput for encoder-decoder models, a prefill for decoder-only ones.
    if (lm.model->model_info().is_encoder_decoder) {
      if (batches.size() > 1 || batches[0] > 1)
        throw Error("--batch is not supported for encoder-decoder models yet", lm.architecture, "drop --batch");
      return bench_seq2seq(lm, o->pp, o->tg, o->reps, o->json);
    }
    bench_decoder(lm, *o, batches);
  });
}

}  // namespace ferry::cli
