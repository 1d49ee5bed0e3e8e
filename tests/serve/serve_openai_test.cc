// `ferry serve` end to end: the real binary on a real socket (127.0.0.1, a free port), driven by the official OpenAI
// Python client (tests/serve/openai_client.py, from the reference venv): chat and completions, streamed and not,
// equal to `ferry generate`; 32 concurrent streaming clients each equal to their solo result with memory back at
// its idle level; disconnects, malformed bodies, oversize bodies, wrong keys, a full queue; SIGTERM mid-stream ends
// the stream cleanly and the server exits 0.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "support/hf_folder.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* kKey = "sk-ferry-test";
const char* kChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string ferry_bin() { return std::string(FERRY_BINARY_DIR) + "/bin/ferry"; }

// `ferry demo`'s tiny random model (decoder-only, or T5 with arch "t5") made under dir/cache and copied to dir/model;
// returns dir/model, or an empty path when `ferry demo` failed.
fs::path tiny_model_folder(const fs::path& dir, const std::string& arch = "") {
  const std::string demo = ferry_bin() + " demo " + (arch.empty() ? "" : "--arch " + arch + " ") +
                           "--size tiny -n 2 --verify-steps 0 --cache-dir " + (dir / "cache").string() +
                           " > /dev/null 2>&1";
  if (std::system(demo.c_str()) != 0) return {};
  fs::copy(dir / "cache" / (arch.empty() ? "demo-tiny-bf16" : "demo-" + arch + "-tiny-bf16"), dir / "model",
           fs::copy_options::recursive);
  return dir / "model";
}

// A `ferry serve` child process on a free port.
class ServeProcess {
 public:
  ServeProcess(const fs::path& dir, const std::string& name, const std::vector<std::string>& extra) : dir_(dir) {
    out_ = dir / (name + ".out");
    err_ = dir / (name + ".err");
    std::vector<std::string> args = {ferry_bin(), "serve", "-m", (dir / "model").string(), "--port", "0",
                                     "--api-key", kKey, "--model-id", "tiny"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    // Wait for "listening on http://127.0.0.1:PORT".
    const auto until = Clock::now() + std::chrono::seconds(120);
    while (pid_ > 0 && Clock::now() < until) {
      const std::string out = read_file(out_);
      const auto at = out.find("listening on http://127.0.0.1:");
      if (at != std::string::npos && out.find('\n', at) != std::string::npos) {
        port_ = std::stoi(out.substr(at + 30));
        break;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  std::string log() const { return read_file(out_) + read_file(err_); }
  /// Waits for the process to exit; its exit code (128 + signal when killed, -1 on timeout).
  int wait_exit(std::chrono::seconds timeout) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  fs::path dir_, out_, err_;
  pid_t pid_ = -1;
  int port_ = 0;
};

class ServeOpenAi : public ::testing::Test {
 protected:
  static fs::path dir_;
  static std::optional<fs::path> python_;

  static void SetUpTestSuite() {
    python_ = ferry::test::reference_python(FERRY_SOURCE_DIR);
    if (python_ && std::system(("'" + python_->string() + "' -c 'import openai' 2>/dev/null").c_str()) != 0)
      python_.reset();
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("ferry-serve-" + std::to_string(rd()));
    fs::create_directories(dir_);
    ASSERT_FALSE(tiny_model_folder(dir_).empty());
    nlohmann::json config = {{"chat_template", kChatMl}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
    std::ofstream(dir_ / "model" / "tokenizer_config.json") << config.dump();
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void SetUp() override {
    if (!python_) GTEST_SKIP() << "no reference venv with the openai client (scripts/venv)";
  }

  // Runs openai_client.py COMMAND against `server`; returns its exit code, output in `log`.
  int client(const std::string& command, const ServeProcess& server, std::string& log,
             const std::string& extra = "") {
    const fs::path out = dir_ / (command + ".log");
    const std::string cmd = "'" + python_->string() + "' '" FERRY_SOURCE_DIR "/tests/serve/openai_client.py' " +
                            command + " --url " + server.url() + " --key " + kKey + " --model tiny --pid " +
                            std::to_string(server.pid()) + " --ferry " + ferry_bin() + " --folder " +
                            (dir_ / "model").string() + " " + extra + " > '" + out.string() + "' 2>&1";
    const int status = std::system(cmd.c_str());
    log = read_file(out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

fs::path ServeOpenAi::dir_;
std::optional<fs::path> ServeOpenAi::python_;

TEST_F(ServeOpenAi, ChatAndCompletionsStreamedAndNotEqualFerryGenerate) {
  ServeProcess server(dir_, "basic", {});
  ASSERT_TRUE(server.ok()) << server.log();
  std::string log;
  EXPECT_EQ(client("basic", server, log), 0) << log << server.log();
}

TEST_F(ServeOpenAi, ThirtyTwoConcurrentStreamsEachEqualTheirSoloResult) {
  ServeProcess server(dir_, "concurrency", {"--max-batch", "32"});
  ASSERT_TRUE(server.ok()) << server.log();
  std::string log;
#if defined(__SANITIZE_ADDRESS__)
  const std::string sanitized = " --sanitized";
#else
  const std::string sanitized;
#endif
  EXPECT_EQ(client("concurrency", server, log, "--clients 32" + sanitized), 0) << log << server.log();
  std::printf("%s", log.c_str());
}

TEST_F(ServeOpenAi, FaultsAreOpenAiErrorsAndTheServerKeepsServing) {
  ServeProcess server(dir_, "faults", {});
  ASSERT_TRUE(server.ok()) << server.log();
  std::string log;
  EXPECT_EQ(client("faults", server, log), 0) << log << server.log();
}

TEST_F(ServeOpenAi, FullQueueAnswers503WithRetryAfter) {
  ServeProcess server(dir_, "overflow", {"--max-batch", "1", "--max-queue", "1"});
  ASSERT_TRUE(server.ok()) << server.log();
  std::string log;
  EXPECT_EQ(client("overflow", server, log), 0) << log << server.log();
}

TEST_F(ServeOpenAi, RequestsOverTheTimeoutAreCancelledWithA504) {
  ServeProcess server(dir_, "timeout", {"--request-timeout", "0.001"});
  ASSERT_TRUE(server.ok()) << server.log();
  std::string log;
  EXPECT_EQ(client("timeout", server, log), 0) << log << server.log();
}

TEST_F(ServeOpenAi, OneHundredTwentyEightSimultaneousConnectionsAreAllAnswered) {
  ServeProcess server(dir_, "connections", {"--max-batch", "32", "--max-queue", "128"});
  ASSERT_TRUE(server.ok()) << server.log();
  std::string log;
  EXPECT_EQ(client("connections", server, log, "--clients 128"), 0) << log << server.log();
}

// The port is bound without SO_REUSEPORT (cpp-httplib's default sets it): a second server on a port another
// `ferry serve` holds fails with a clear message instead of silently sharing its connections.
TEST_F(ServeOpenAi, ASecondServerOnTheSamePortFails) {
  ServeProcess server(dir_, "port", {});
  ASSERT_TRUE(server.ok()) << server.log();
  const fs::path err = dir_ / "port-second.err";
  const int status = std::system(("timeout 120 " + ferry_bin() + " serve -m " + (dir_ / "model").string() +
                                  " --port " + std::to_string(server.port()) + " > /dev/null 2> " + err.string())
                                     .c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << read_file(err);
  EXPECT_NE(read_file(err).find("cannot listen on 127.0.0.1:" + std::to_string(server.port())), std::string::npos)
      << read_file(err);
}

// /metrics labels requests by route, never by raw path: 1000 random unknown paths (404, and 401 under /v1/ without
// the key) add one series each for "other", not 1000 — any client could otherwise grow the exposition without
// bound, or put quotes and newlines into a label.
TEST(ServeCli, MetricsStayBoundedUnderRandomUnknownPaths) {
  ferry::test::TempDir dir("ferry-serve-metrics");
  ASSERT_FALSE(tiny_model_folder(dir.path()).empty());
  ServeProcess server(dir.path(), "metrics", {});
  ASSERT_TRUE(server.ok()) << server.log();
  httplib::Client http("127.0.0.1", server.port());
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const std::string tail = std::to_string(rng()) + (i % 3 == 0 ? "%22%0Aevil" : "");
    auto r = i % 2 == 0 ? http.Get("/random/" + tail) : http.Post("/v1/random-" + tail, "{}", "application/json");
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, i % 2 == 0 ? 404 : 401) << i;
  }
  auto m = http.Get("/metrics");
  ASSERT_TRUE(m);
  int series = 0;
  std::istringstream lines(m->body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("ferry_http_requests_total{", 0) == 0) ++series;
  EXPECT_LE(series, 4) << m->body;
  EXPECT_NE(m->body.find("ferry_http_requests_total{endpoint=\"other\",status=\"404\"} 500"), std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("ferry_http_requests_total{endpoint=\"other\",status=\"401\"} 500"), std::string::npos)
      << m->body;
  EXPECT_EQ(m->body.find("evil"), std::string::npos);
}

TEST_F(ServeOpenAi, SigtermEndsStreamsCleanlyAndExitsZero) {
  ServeProcess server(dir_, "shutdown", {"--shutdown-timeout", "0.2"});
  ASSERT_TRUE(server.ok()) << server.log();
  std::string log;
  EXPECT_EQ(client("shutdown", server, log), 0) << log << server.log();
  EXPECT_EQ(server.wait_exit(std::chrono::seconds(30)), 0) << server.log();
}

// An encoder-decoder model (T5) behind the same API, through cpp-httplib's client (no Python needed): the completion
// equals `ferry generate`, streamed or not.
TEST(ServeCli, Seq2SeqModelsServeCompletionsLikeGenerate) {
  ferry::test::TempDir dir("ferry-serve-t5");
  ASSERT_FALSE(tiny_model_folder(dir.path(), "t5").empty());
  const fs::path want = dir.path() / "want.json";
  ASSERT_EQ(std::system((ferry_bin() + " generate -m " + (dir.path() / "model").string() +
                         " -p 'translate English to German: hello' -n 8 --json > " + want.string() + " 2>/dev/null")
                            .c_str()),
            0);
  const auto expected = nlohmann::json::parse(read_file(want));
  ServeProcess server(dir.path(), "t5", {});
  ASSERT_TRUE(server.ok()) << server.log();
  httplib::Client http("127.0.0.1", server.port());
  http.set_read_timeout(120);
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kKey}};
  const std::string body = R"({"model": "tiny", "prompt": "translate English to German: hello", "max_tokens": 8,
                               "temperature": 0})";
  auto whole = http.Post("/v1/completions", auth, body, "application/json");
  ASSERT_TRUE(whole) << server.log();
  ASSERT_EQ(whole->status, 200) << whole->body;
  const auto j = nlohmann::json::parse(whole->body);
  EXPECT_EQ(j["choices"][0]["text"], expected["text"]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], expected["prompt_ids"].size());
  // Streamed: the text pieces of the events add up to the same text.
  auto streamed = http.Post("/v1/completions", auth, body.substr(0, body.size() - 1) + R"(, "stream": true})",
                            "application/json");
  ASSERT_TRUE(streamed);
  std::string text, last;
  std::istringstream events(streamed->body);
  for (std::string line; std::getline(events, line);) {
    if (line.rfind("data: ", 0) != 0) continue;
    last = line;
    if (line == "data: [DONE]") break;
    text += nlohmann::json::parse(line.substr(6))["choices"][0].value("text", "");
  }
  EXPECT_EQ(text, expected["text"]);
  EXPECT_EQ(last, "data: [DONE]");
  // Chat needs a template this folder does not have: a 400 that says so.
  auto chat = http.Post("/v1/chat/completions", auth,
                        R"({"model": "tiny", "messages": [{"role": "user", "content": "hi"}]})", "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 400);
  EXPECT_EQ(nlohmann::json::parse(chat->body)["error"]["code"], "no_chat_template");
}

// Speculative decoding in the server (issue 34): with --lookup and a --draft-model every request speculates on its
// own and each answer is plain decoding's (greedy); a request may turn either off; num_assistant_tokens against a
// server without a draft is a 400 naming the field.
TEST(ServeCli, SpeculativeDecodingKeepsEachRequestsOutput) {
  ferry::test::TempDir dir("ferry-serve-spec");
  const fs::path model = tiny_model_folder(dir.path());
  ASSERT_FALSE(model.empty());
  const std::vector<std::string> prompts = {"[1, 5, 9, 1, 5, 9, 1, 5]", "[7, 7, 2, 7, 7, 2]", "[3, 4, 5, 6]"};
  std::vector<nlohmann::json> want;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::string ids = prompts[i].substr(1, prompts[i].size() - 2);
    ids.erase(std::remove(ids.begin(), ids.end(), ' '), ids.end());
    const fs::path out = dir.path() / ("want" + std::to_string(i) + ".json");
    ASSERT_EQ(std::system((ferry_bin() + " generate -m " + model.string() + " --prompt-ids " + ids +
                           " -n 12 --json > " + out.string() + " 2>/dev/null")
                              .c_str()),
              0);
    want.push_back(nlohmann::json::parse(read_file(out)));
  }
  ServeProcess server(dir.path(), "spec",
                      {"--lookup", "3", "--draft-model", model.string(), "--draft-max", "4", "--draft-p-min", "0"});
  ASSERT_TRUE(server.ok()) << server.log();
  const httplib::Headers auth = {{"Authorization", std::string("Bearer ") + kKey}};
  const std::vector<std::string> settings = {"", R"(, "prompt_lookup_num_tokens": 0)", R"(, "num_assistant_tokens": 0)",
                                             R"(, "num_assistant_tokens": 2)"};
  std::vector<std::thread> clients;
  std::vector<std::string> failures(prompts.size() * settings.size());
  for (std::size_t i = 0; i < prompts.size(); ++i)
    for (std::size_t k = 0; k < settings.size(); ++k)
      clients.emplace_back([&, i, k] {
        httplib::Client http("127.0.0.1", server.port());
        http.set_read_timeout(120);
        const std::string body = R"({"model": "tiny", "prompt": )" + prompts[i] +
                                 R"(, "max_tokens": 12, "temperature": 0)" + settings[k] + "}";
        auto res = http.Post("/v1/completions", auth, body, "application/json");
        std::string& f = failures[i * settings.size() + k];
        if (!res) f = "no answer to " + body;
        else if (res->status != 200) f = body + " -> " + res->body;
        else if (nlohmann::json::parse(res->body)["choices"][0]["text"] != want[i]["text"])
          f = body + " -> " + res->body + ", want " + want[i]["text"].dump();
      });
  for (auto& c : clients) c.join();
  for (const auto& f : failures) EXPECT_TRUE(f.empty()) << f;
  httplib::Client metrics_client("127.0.0.1", server.port());
  auto metrics = metrics_client.Get("/metrics");
  ASSERT_TRUE(metrics);
  const auto at = metrics->body.find("\nferry_speculative_accepted_tokens_total ");
  ASSERT_NE(at, std::string::npos) << metrics->body;
  EXPECT_GT(std::stoll(metrics->body.substr(at + 41)), 0) << "the draft is the model: its proposals are kept";
  // Without a draft, asking for one is a 400 naming the field.
  ServeProcess plain(dir.path(), "plain", {});
  ASSERT_TRUE(plain.ok()) << plain.log();
  httplib::Client http("127.0.0.1", plain.port());
  auto res = http.Post("/v1/completions", auth,
                       R"({"model": "tiny", "prompt": [1, 2], "max_tokens": 2, "num_assistant_tokens": 3})",
                       "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("num_assistant_tokens"), std::string::npos) << res->body;
}

TEST(ServeCli, NoChatTemplateIsAClearMessageAndCompletionsStillWork) {
  // Covered end to end by the basic test's folder (which has one); here: a folder without, through the CLI.
  ferry::test::TempDir dir("ferry-serve-cli");
  const std::string demo = ferry_bin() + " demo --size tiny -n 2 --verify-steps 0 --cache-dir " +
                           (dir.path() / "cache").string() + " > /dev/null 2>&1";
  ASSERT_EQ(std::system(demo.c_str()), 0);
  const fs::path model = dir.path() / "cache" / "demo-tiny-bf16";
  const fs::path err = dir.path() / "err";
  const int status = std::system((ferry_bin() + " generate -m " + model.string() + " --chat hi -n 2 > /dev/null 2> " +
                                  err.string()).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(read_file(err).find("no chat template"), std::string::npos) << read_file(err);
}

}  // namespace
