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

// Finds rank `rank` of the job whose environment holds FERRY_TEST_JOB=`tag`, writes its pid to `pids`: a bash
// snippet.
std::string find_rank(const std::string& tag, int rank, const std::string& pids) {
  return "for i in $(seq 200); do for p in $(pgrep -f 'bin/ferry (generate|serve)'); do "
         "grep -qz '^FERRY_TEST_JOB=" +
         tag +
         "$' /proc/$p/environ 2>/dev/null && "
         "grep -qz '^OMPI_COMM_WORLD_RANK=" +
         std::to_string(rank) + "$' /proc/$p/environ 2>/dev/null && echo $p > " + pids + "; done; [ -s " + pids +
         " ] && break; sleep 0.1; done; ";
}

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

  /// A bash script: `mpirun -np 2 ferry generate --interactive` tagged FERRY_TEST_JOB=`tag` (its ranks are found by
  /// the tag: ctest runs tests side by side), `signal` (a kill command) sent to rank 1 once both ranks are up, then a
  /// prompt for rank 0; waits at most 60 s for the job (then kills it: a hang) and exits with its status.
  static std::string fault_job(const std::string& tag, const std::string& signal, const std::string& env = "") {
    const std::string fifo = (dir_ / ("in-" + tag)).string(), pids = (dir_ / (tag + ".pid")).string();
    return "rm -f " + fifo + " " + pids + "; mkfifo " + fifo + "; (" + env + "FERRY_TEST_JOB=" + tag + " " + kMpirun +
           " -np 2 " + ferry() + " generate -m " + model_.string() + " --device-map " + map_file(2, false).string() +
           " -n 4 --interactive < " + fifo + ") & mp=$!; exec 3> " + fifo + "; " + find_rank(tag, 1, pids) +
           "sleep 2; " + signal + " $(cat " + pids +
           "); echo hello >&3; timeout 60 tail --pid=$mp -f /dev/null; "
           "kill -CONT $(cat " +
           pids + ") 2>/dev/null; pkill -9 -P $mp 2>/dev/null; wait $mp";
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

// A batch (generate -i) under mpirun in micro-batches: the same texts as one process, and the end-of-run line says
// how many micro-batches were in flight and the bubble.
TEST_F(MpirunCli, BatchesInMicroBatchesGiveTheSameTexts) {
  const fs::path prompts = dir_ / "prompts.jsonl";
  {
    std::ofstream p(prompts);
    for (int i = 0; i < 5; ++i)
      p << "{\"prompt_ids\": [" << 5 + i << ", 9, 33, 9, 5], \"max_new_tokens\": " << 6 + 2 * i << "}\n";
  }
  const std::string args = " generate -m " + model_.string() + " -i " + prompts.string() + " --batch 5";
  const Outcome one = run(ferry() + args);
  ASSERT_EQ(one.code, 0) << one.err;
  for (int micro : {2, 5}) {
    const Outcome r = run(kMpirun + " -np 2 " + ferry() + args + " -t 1 --device-map " + map_file(2, false).string() +
                          " --micro-batches " + std::to_string(micro));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(r.out, one.out) << "micro-batches " << micro;
    EXPECT_NE(r.err.find("pipeline: 2 ranks, up to " + std::to_string(micro) + " micro-batches per forward, bubble "),
              std::string::npos)
        << r.err;
  }
  const Outcome bad = run(ferry() + args + " --micro-batches 65");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--micro-batches"), std::string::npos) << bad.err;
}

// `ferry serve` under mpirun: rank 0 serves through the whole pipeline (the other rank follows), the completion is
// the one-process generation's text, and a SIGTERM to rank 0 stops every rank cleanly.
TEST_F(MpirunCli, ServeAnswersThroughThePipeline) {
  const Outcome one = run(ferry() + generate_args());
  ASSERT_EQ(one.code, 0) << one.err;
  const std::string want = nlohmann::json::parse(one.out)["text"];
  const int port = 20000 + static_cast<int>(std::random_device{}() % 20000);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  const std::string pids = (dir_ / "serve0.pid").string();
  const std::string cmd = "FERRY_TEST_JOB=serve " + kMpirun + " -np 2 " + ferry() + " serve -m " + model_.string() +
                          " --device-map " + map_file(2, false).string() + " --port " + std::to_string(port) +
                          " & mp=$!; " + find_rank("serve", 0, pids) + "for i in $(seq 300); do curl -sf " + url +
                          "/v1/models > /dev/null && break; sleep 0.2; done; "
                          "curl -sf " +
                          url +
                          "/v1/completions -H 'Content-Type: application/json' -d "
                          "'{\"model\": \"demo-tiny-bf16\", \"prompt\": [5,9,33,9,5,9,33], \"max_tokens\": 16, "
                          "\"temperature\": 0}'; echo; kill -TERM $(cat " +
                          pids + "); timeout 60 tail --pid=$mp -f /dev/null; wait $mp";
  const Outcome r = run(cmd);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_LT(r.seconds, 90);
  const std::size_t at = r.out.find("\n{");  // after serve's "listening on" line
  ASSERT_NE(at, std::string::npos) << r.out << r.err;
  const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  const auto got = nlohmann::json::parse(line);
  EXPECT_EQ(got["choices"][0]["text"], want) << line;
}

// Ranks in two network namespaces joined by a veth pair (iproute2): the activations cross a real TCP path (Open
// MPI's tcp transport only, no shared memory), and the tokens are one process's. mpirun runs in the first namespace
// with rank 0; rank 1 is started in the second and reaches mpirun's PMIx server over the veth too. Skipped where
// namespaces cannot be made (not root, no CAP_NET_ADMIN, no iproute2).
TEST_F(MpirunCli, RanksInSeparateNetworkNamespacesTalkOverTcp) {
  const std::string tag = std::to_string(std::random_device{}() % 100000);
  const std::string a = "ferry-a" + tag, b = "ferry-b" + tag, va = "fa" + tag, vb = "fb" + tag;
  const std::string net = "10.77." + std::to_string(std::stoi(tag) % 250) + ".";
  struct Namespaces {
    std::string a, b;
    ~Namespaces() {
      (void)std::system(("ip netns del " + a + " 2>/dev/null; ip netns del " + b + " 2>/dev/null").c_str());
    }
  } cleanup{a, b};
  const std::string setup = "set -e; ip netns add " + a + "; ip netns add " + b + "; ip link add " + va +
                            " type veth peer name " + vb + "; ip link set " + va + " netns " + a + "; ip link set " +
                            vb + " netns " + b + "; ip -n " + a + " addr add " + net + "1/24 dev " + va + "; ip -n " +
                            b + " addr add " + net + "2/24 dev " + vb + "; for n in " + a + " " + b +
                            "; do ip -n $n link set lo up; done; ip -n " + a + " link set " + va + " up; ip -n " + b +
                            " link set " + vb + " up; ip netns exec " + b + " cat /sys/class/net/" + vb +
                            "/statistics/rx_bytes";
  if (run(setup).code != 0) GTEST_SKIP() << "cannot make network namespaces here (needs root and iproute2)";
  const Outcome one = run(ferry() + generate_args());
  ASSERT_EQ(one.code, 0) << one.err;
  const std::string rx = "ip netns exec " + b + " cat /sys/class/net/" + vb + "/statistics/rx_bytes";
  const Outcome before = run(rx);
  const std::string args = generate_args() + " --device-map " + map_file(2, false).string();
  const Outcome r = run("ip netns exec " + a + " env PMIX_MCA_ptl_tcp_if_include=" + net + "0/24 " + kMpirun +
                        " --mca btl tcp,self --mca btl_tcp_if_include " + net + "0/24 --mca oob_tcp_if_include " + net +
                        "0/24 -np 1 " + ferry() + args + " : -np 1 ip netns exec " + b + " " + ferry() + args);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto got = nlohmann::json::parse(r.out);
  EXPECT_EQ(got["generated_ids"], nlohmann::json::parse(one.out)["generated_ids"]);
  // Rank 1's end of the veth received at least the activations rank 0 sent it.
  const Outcome after = run(rx);
  const long long received = std::stoll(after.out) - std::stoll(before.out);
  EXPECT_GE(received, got["pipeline"]["rank0_bytes_sent"].get<long long>()) << "rx before " << before.out;
}

TEST_F(MpirunCli, AMapNamingMoreRanksThanTheJobHasIsAnError) {
  const Outcome r = run(ferry() + generate_args() + " --device-map " + map_file(2, false).string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("mpirun -np 2"), std::string::npos) << r.err;
}

// Rank 1 dies while rank 0 waits for a prompt (--interactive): mpirun ends the job and names the rank.
TEST_F(MpirunCli, ARankKilledEndsEveryRank) {
  const Outcome r = run(fault_job("killed", "kill -9"));
  EXPECT_NE(r.code, 0) << r.out << r.err;
  EXPECT_LT(r.seconds, 60) << "a hang";
  EXPECT_NE((r.out + r.err).find("rank 1"), std::string::npos) << r.out << r.err;
}

// Rank 1 stops answering (SIGSTOP) while rank 0 needs its layers: rank 0's wait ends after FERRY_PG_TIMEOUT with an
// error naming rank 1, and the job ends.
TEST_F(MpirunCli, AStuckRankEndsTheJobAfterTheTimeout) {
  const Outcome r = run(fault_job("stuck", "kill -STOP", "FERRY_PG_TIMEOUT=3 "));
  EXPECT_NE(r.code, 0) << r.out << r.err;
  EXPECT_LT(r.seconds, 60) << "a hang";
  EXPECT_NE((r.out + r.err).find("rank 1"), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("FERRY_PG_TIMEOUT"), std::string::npos) << r.out << r.err;
}

}  // namespace
