// `mpirun -np N ferry generate` with a device map over ranks (big_modeling/pipeline.h): the same tokens as one
// process, and the faults — a rank killed, a rank stuck — end every rank with a message naming the rank, never a
// hang. Skipped when ferry was built without MPI or mpirun is not installed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "ferry/core/process_group.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// As root, Open MPI needs its two ALLOW variables; containers often forbid its single-copy mechanism; under the
// sanitizers, Open MPI's own allocations would be reported as leaks.
const std::string kMpirun =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "
    "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 mpirun --oversubscribe";

class MpirunCli : public ::testing::Test {
 protected:
  static fs::path dir_, model_;

  static void SetUpTestSuite() {
    if (!ferry::process_groups_available() || std::system("command -v mpirun > /dev/null 2>&1") != 0) return;
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("ferry-mpirun-" + std::to_string(rd()));
    fs::create_directories(dir_);
    const Outcome r = run(ferry() + " demo --size tiny -n 2 --verify-steps 1 --cache-dir " + (dir_ / "cache").string());
    ASSERT_EQ(r.code, 0) << r.err;
    model_ = dir_ / "cache" / "demo-tiny-bf16";
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  void SetUp() override {
    if (model_.empty()) GTEST_SKIP() << "ferry was built without MPI, or mpirun is not installed";
  }

  static std::string ferry() { return std::string(FERRY_BINARY_DIR) + "/bin/ferry"; }

  /// Runs a bash command line, capturing both streams and the time it took.
  static Outcome run(const std::string& cmd) {
    static int n = 0;
    const fs::path out = dir_ / ("out" + std::to_string(++n)), err = dir_ / ("err" + std::to_string(n));
    const auto t0 = std::chrono::steady_clock::now();
    std::ofstream(dir_ / "cmd.sh") << "{ " << cmd << "\n} > " << out.string() << " 2> " << err.string()
                                   << " < /dev/null\n";
    const int status = std::system(("bash " + (dir_ / "cmd.sh").string()).c_str());
    Outcome r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  /// The demo model's four blocks over `ranks` ranks (in order), rank 1's on disk when `rank1_disk`; the rest on
  /// rank 0. Written as a device-map JSON file.
  static fs::path map_file(int ranks, bool rank1_disk) {
    nlohmann::json m = {{"model.embed_tokens", "cpu"}, {"model.rotary_emb", "cpu"}};
    for (int i = 0; i < 4; ++i) {
      const int r = i * ranks / 4;
      m["model.layers." + std::to_string(i)] = r == 0 ? std::string("cpu")
                                                      : "rank" + std::to_string(r) + ":" +
                                                            (r == 1 && rank1_disk ? "disk" : "cpu");
    }
    m["model.norm"] = "cpu";
    m["lm_head"] = "cpu";
    const fs::path p = dir_ / ("map" + std::to_string(ranks) + (rank1_disk ? "d" : "") + ".json");
    std::ofstream(p) << m.dump();
    return p;
  }

  static std::string generate_args() {
    return " generate -m " + model_.string() + " --prompt-ids 5,9,33,9,5,9,33 -n 16 --json";
  }
};

fs::path MpirunCli::dir_, MpirunCli::model_;

TEST_F(MpirunCli, TheSameTokensAsOneProcess) {
  const Outcome one = run(ferry() + generate_args());
  ASSERT_EQ(one.code, 0) << one.err;
  const auto want = nlohmann::json::parse(one.out)["generated_ids"];
  ASSERT_EQ(want.size(), 16u);
  for (const auto& [np, disk] : {std::pair{2, false}, std::pair{3, true}}) {
    const Outcome r = run(kMpirun + " -np " + std::to_string(np) + " " + ferry() + generate_args() + " --device-map " +
                          map_file(np, disk).string() + " --offload-folder " + (dir_ / "off").string());
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const auto got = nlohmann::json::parse(r.out);  // rank 0 alone prints
    EXPECT_EQ(got["generated_ids"], want) << "np " << np;
    EXPECT_EQ(got["device_map"]["model.layers.3"], "rank" + std::to_string(np - 1) + ":cpu");
  }
}

TEST_F(MpirunCli, AMapNamingMoreRanksThanTheJobHasIsAnError) {
  const Outcome r = run(ferry() + generate_args() + " --device-map " + map_file(2, false).string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("mpirun -np 2"), std::string::npos) << r.err;
}

// Rank 1 dies while rank 0 waits for a prompt (--interactive): mpirun ends the job and names the rank.
TEST_F(MpirunCli, ARankKilledEndsEveryRank) {
  const std::string pids = (dir_ / "rank1.pid").string();
  const std::string cmd = "mkfifo " + (dir_ / "in").string() + "; (" + kMpirun + " -np 2 " + ferry() + " generate -m " +
                          model_.string() + " --device-map " + map_file(2, false).string() + " -n 4 --interactive < " +
                          (dir_ / "in").string() + ") & mp=$!; exec 3> " + (dir_ / "in").string() +
                          "; for i in $(seq 200); do for p in $(pgrep -f 'bin/ferry generate'); do "
                          "grep -qz '^OMPI_COMM_WORLD_RANK=1$' /proc/$p/environ 2>/dev/null && echo $p > " +
                          pids + "; done; [ -s " + pids + " ] && break; sleep 0.1; done; sleep 2; kill -9 $(cat " +
                          pids + "); echo hello >&3; timeout 60 tail --pid=$mp -f /dev/null; wait $mp";
  const Outcome r = run(cmd);
  EXPECT_NE(r.code, 0) << r.out << r.err;
  EXPECT_LT(r.seconds, 60) << "a hang";
  EXPECT_NE((r.out + r.err).find("rank 1"), std::string::npos) << r.out << r.err;
  fs::remove(dir_ / "in");
}

// Rank 1 stops answering (SIGSTOP) while rank 0 needs its layers: rank 0's wait ends after FERRY_PG_TIMEOUT with an
// error naming rank 1, and the job ends.
TEST_F(MpirunCli, AStuckRankEndsTheJobAfterTheTimeout) {
  const std::string pids = (dir_ / "rank1s.pid").string();
  const std::string cmd = "mkfifo " + (dir_ / "in2").string() + "; (FERRY_PG_TIMEOUT=3 " + kMpirun +
                          " -x FERRY_PG_TIMEOUT -np 2 " + ferry() + " generate -m " + model_.string() +
                          " --device-map " + map_file(2, false).string() + " -n 4 --interactive < " +
                          (dir_ / "in2").string() + ") & mp=$!; exec 3> " + (dir_ / "in2").string() +
                          "; for i in $(seq 200); do for p in $(pgrep -f 'bin/ferry generate'); do "
                          "grep -qz '^OMPI_COMM_WORLD_RANK=1$' /proc/$p/environ 2>/dev/null && echo $p > " +
                          pids + "; done; [ -s " + pids + " ] && break; sleep 0.1; done; sleep 2; kill -STOP $(cat " +
                          pids + "); echo hello >&3; timeout 60 tail --pid=$mp -f /dev/null; kill -CONT $(cat " + pids +
                          ") 2>/dev/null; wait $mp";
  const Outcome r = run(cmd);
  EXPECT_NE(r.code, 0) << r.out << r.err;
  EXPECT_LT(r.seconds, 60) << "a hang";
  EXPECT_NE((r.out + r.err).find("rank 1"), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("FERRY_PG_TIMEOUT"), std::string::npos) << r.out << r.err;
  fs::remove(dir_ / "in2");
}

}  // namespace
