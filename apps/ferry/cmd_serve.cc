// ferry serve -m FOLDER — load once (plan table, progress bar), then answer the OpenAI API over HTTP
// (apps/serve: the engine and the routes). SIGINT/SIGTERM: stop accepting, let in-flight requests finish for up to
// --shutdown-timeout seconds, cancel the rest (their streams end cleanly), exit 0. A second signal exits at once.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <limits>
#include <thread>

#include "chat.h"
#include "cli.h"
#include "commands.h"
#include "disk_io_report.h"
#include "ferry/big_modeling/max_memory.h"
#include "ferry/core/error.h"
#include "ferry/core/process_group.h"
#include "ferry/models/gguf_model.h"
#include "ferry/models/pipeline.h"
#include "ferry/text/generate.h"
#include "run_model.h"
#include "serve/engine.h"
#include "serve/server.h"
#include "speculative_flags.h"

namespace ferry::cli {

namespace {

struct ServeFlags {
  ModelFlags model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string model_id;
  std::string chat_template;
  int64_t max_batch = 32, max_queue = 64;
  std::string max_kv_memory;
  double request_timeout = 600;
  double shutdown_timeout = 10;
  int keep_alive = 0;
  std::size_t max_body = 8u << 20;
  SpeculativeFlags speculative;  // --lookup, --draft-model, ...
};

// Signals reach a pipe; a thread reads it (a handler may only write(2)).
int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};

extern "C" void on_signal(int) {
  const int saved = errno;
  if (g_signals.fetch_add(1) >= 1) _exit(130);  // the second Ctrl-C: now
  const char c = 1;
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

std::size_t kv_budget(const ServeFlags& f, const LoadedModel& lm, int64_t context) {
  if (!f.max_kv_memory.empty()) {
    try {
      return static_cast<std::size_t>(convert_file_size_to_int(f.max_kv_memory));
    } catch (const Error& e) {
      throw e.with_context("--max-kv-memory");
    }
  }
  const models::LanguageModelInfo& info = lm.model->model_info();
  // Every running sequence may fill its context: that much for each, up to half the RAM still available.
  const int64_t per_seq = context < (int64_t{1} << 40) ? kv_cache_bytes(info, context) : kv_cache_bytes(info, 4096);
  return static_cast<std::size_t>(std::min<int64_t>(per_seq * f.max_batch, cacheable_ram_bytes() / 2));
}

void run_serve(const ServeFlags& f) {
  f.model.apply();
  std::optional<text::Tokenizer> tok;
  const bool gguf = models::is_gguf_file(f.model.model);
  if (gguf || std::filesystem::exists(std::filesystem::path(f.model.model) / "tokenizer.json")) {
    try {
      tok = text::load_tokenizer(f.model.model);
    } catch (const Error& e) {
      if (!gguf) throw;
      std::fprintf(stderr, "warning: %s\n  only token-id prompts will be served\n", e.what());
    }
  }
  std::optional<text::ChatTemplate> chat = text::load_chat_template(f.model.model, f.chat_template,
                                                                    tok ? &*tok : nullptr);
  if (!chat) std::fprintf(stderr, "note: %s\n  /v1/chat/completions will answer 400; /v1/completions works\n",
                          no_chat_template_message(f.model.model).c_str());

  // Under mpirun with a device map over ranks, rank 0 serves and the other ranks follow its forwards.
  const bool follower = world_process_group()->rank() != 0;
  LoadedModel lm = load_for_run(f.model, follower ? nullptr : stderr);
  if (const auto& group = lm.model->pipeline_group(); group && group->rank() != 0) {
    models::follow_pipeline(*lm.model);
    return;
  }
  std::optional<LoadedModel> draft;  // outlives the engine and the server (declared before them)
  if (!f.speculative.draft_model.empty()) draft = load_draft_model(f.speculative.draft_model, lm, f.model.model);
  serve::EngineOptions eo;
  eo.batch.max_batch_size = f.max_batch;
  eo.max_queue = f.max_queue;
  eo.context = f.model.context;
  eo.batch.max_kv_cache_bytes = kv_budget(f, lm, serve::sequence_context(*lm.model, f.model.context));
  auto engine = std::make_unique<serve::Engine>(*lm.model, tok ? &*tok : nullptr, eo);

  serve::ServerOptions so;
  so.host = f.host;
  so.port = f.port;
  so.api_key = f.api_key;
  const std::filesystem::path folder(f.model.model);
  so.model_id = !f.model_id.empty() ? f.model_id
                                    : (folder.has_filename() ? folder.filename() : folder.parent_path().filename()).string();
  so.model_aliases = {f.model.model, std::filesystem::absolute(folder).string()};
  so.max_body_bytes = f.max_body;
  so.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.request_timeout * 1000));
  so.keep_alive_seconds = f.keep_alive;
  so.eos_token_ids = lm.eos_token_ids;
  so.speculative = f.speculative.options(draft ? draft->model.get() : nullptr);
  so.model_details = loaded_model_json(lm, chat ? &*chat : nullptr);
  so.streamed_bytes_per_forward = static_cast<uint64_t>(lm.streamed_bytes_per_forward);
  so.disk_read_bytes = [] { return process_disk_read_bytes(); };
  serve::ChatRenderer renderer;
  if (chat)
    renderer = [t = std::make_shared<text::ChatTemplate>(std::move(*chat))](const nlohmann::ordered_json& messages,
                                                                           const nlohmann::ordered_json& tools) {
      text::ChatTemplateOptions o;
      o.add_generation_prompt = true;
      o.tools = tools;
      return t->apply(messages, o);
    };
  serve::Server server(*engine, renderer, so);
  const int port = server.bind();

  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) throw Error("cannot create a pipe for signals", "serve");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal

  std::thread watcher([&] {
    char c;
    if (read(g_signal_pipe[0], &c, 1) != 1 || c == 0) return;  // 0: the server ended by itself
    std::fprintf(stderr, "\nserve: shutting down: no new requests; waiting up to %.0f s for %lld in flight "
                         "(Ctrl-C again to quit now)\n",
                 f.shutdown_timeout, static_cast<long long>(server.active_requests()));
    engine->drain();
    using Clock = std::chrono::steady_clock;
    const auto grace = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(f.shutdown_timeout));
    while ((!engine->idle() || server.active_requests() > 0) && Clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!engine->idle()) {
      std::fprintf(stderr, "serve: cancelling the requests still running\n");
      engine->cancel_all();
    }
    // Cancelled streams write their last event; give them a moment before the sockets close.
    const auto last = Clock::now() + std::chrono::seconds(5);
    while (server.active_requests() > 0 && Clock::now() < last) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    server.stop();
  });

  std::fprintf(stderr, "serve: %s on http://%s:%d/v1 (model id \"%s\"; batch %lld, queue %lld, context %s, KV budget %s)\n",
               lm.architecture.c_str(), f.host.c_str(), port, so.model_id.c_str(), static_cast<long long>(f.max_batch),
               static_cast<long long>(f.max_queue),
               engine->context() == std::numeric_limits<int64_t>::max() ? "unlimited"
                                                                         : std::to_string(engine->context()).c_str(),
               format_bytes(static_cast<int64_t>(eo.batch.max_kv_cache_bytes)).c_str());
  std::fprintf(stdout, "listening on http://%s:%d\n", f.host.c_str(), port);
  std::fflush(stdout);
  std::fflush(stderr);
  server.listen();
  const char end = 0;
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &end, 1);  // wakes the watcher if no signal came
  watcher.join();
  engine.reset();
  std::fprintf(stderr, "serve: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  auto* cmd = app.add_subcommand("serve", "serve a model over an OpenAI-compatible HTTP API (chat, completions, "
                                          "streaming, continuous batching)");
  f->model.add_to(*cmd);
  cmd->add_option("--host", f->host, "address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", f->port, "port (default 8080; 0 = any free port, printed at start)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", f->api_key, "require 'Authorization: Bearer KEY' on /v1/ (default: $FERRY_API_KEY, "
                                           "else no key)")
      ->envname("FERRY_API_KEY");
  cmd->add_option("--model-id,--alias", f->model_id, "the model name clients use (default: the folder's name)");
  cmd->add_option("--chat-template", f->chat_template, "a Jinja chat template file instead of the model's");
  cmd->add_option("--max-batch", f->max_batch, "sequences generated together (default 32)")->check(CLI::PositiveNumber);
  cmd->add_option("--max-queue", f->max_queue, "requests waiting beyond the batch before 503 (default 64)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-kv-memory", f->max_kv_memory, "bytes all KV caches may use (default: max-batch full "
                                                        "contexts (--context) up to half the free RAM)");
  cmd->add_option("--request-timeout", f->request_timeout, "seconds a request may take (default 600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--shutdown-timeout", f->shutdown_timeout,
                  "seconds in-flight requests may finish after SIGINT/SIGTERM before they are cancelled (default 10)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--keep-alive", f->keep_alive,
                  "seconds an idle connection stays open for the client's next request (default 0: one request per "
                  "connection; a longer time holds a worker thread per idle connection)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-body", f->max_body, "largest request body in bytes (default 8 MiB)")->check(CLI::PositiveNumber);
  f->speculative.add_to(*cmd, /*per_request=*/true);
  cmd->callback([f] { run_serve(*f); });
}

}  // namespace ferry::cli
