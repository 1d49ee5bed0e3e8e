// Server: the OpenAI-compatible HTTP API of `ferry serve` over an Engine (cpp-httplib, Debian's libcpp-httplib).
//
//   POST /v1/chat/completions   messages -> the model's chat template -> tokens -> the engine
//   POST /v1/completions        prompt (text or token ids) -> the engine
//        "stream": true answers with server-sent events in OpenAI's chunk format, ending with `data: [DONE]`.
//   GET  /v1/models, /v1/models/{id}, /health, /metrics (Prometheus text)
//
// Every refusal is an OpenAI-shaped JSON error (400 bad request, 401 wrong key, 404 unknown model or path, 413 body
// over the limit, 503 queue full or shutting down, 504 not finished within the request timeout) and the server goes
// on serving the others. A client that disconnects mid-stream has its sequence cancelled at the next step.
//
// Connections: cpp-httplib serves each connection on one worker thread for as long as it stays open. By default
// every response closes its connection: an idle keep-alive connection would hold a worker, and a client pool that
// reuses a connection just as the server's idle timeout closes it can get a connection error. The listen backlog is
// SOMAXCONN: cpp-httplib's own 5 overflowed under a burst of connects (SYN cookies, then resets: the intermittent
// connection errors of the 32-client test). The port is bound without SO_REUSEPORT, so a second server on a taken
// port fails.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/engine.h"
#include "serve/metrics.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"

namespace httplib {
class Server;
class DataSink;
struct Response;
}

namespace ferry::serve {

/// Renders chat messages (and tools, null when absent) into the prompt text with the model's chat template;
/// throws ferry::Error when the template refuses them (raise_exception).
using ChatRenderer =
    std::function<std::string(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;              // 0: any free port (bind() returns it)
  std::string api_key;          // empty: no authentication
  std::string model_id;         // the id /v1/models lists and requests must name
  std::vector<std::string> model_aliases;  // other names accepted in requests (the folder path)
  std::size_t max_body_bytes = 8u << 20;
  std::chrono::milliseconds request_timeout{600000};
  int threads = 0;              // HTTP worker threads; 0 = Engine::max_requests() + 8
  // Seconds an idle connection stays open for its client's next request. 0: one request per connection (every
  // response says "Connection: close"), so a pooled client can never send on a connection the server is closing.
  int keep_alive_seconds = 0;
  std::vector<text::TokenId> eos_token_ids;
  /// Speculative decoding for every request (--lookup, --draft-model: the draft, loaded, outlives the server); a
  /// request may turn either off or change its number (prompt_lookup_num_tokens, num_assistant_tokens).
  text::SpeculativeOptions speculative;
  /// What /v1/models/{id} adds under "ferry" (beside OpenAI's id, object, created, owned_by): the loaded model's
  /// class, device map, EOS ids and chat template, as `ferry generate --json` reports them. Null: nothing.
  nlohmann::json model_details;
  int64_t default_max_tokens_unbounded = 4096;  // chat without max_tokens when the context is unlimited
  uint64_t streamed_bytes_per_forward = 0;      // for /metrics
  std::function<uint64_t()> disk_read_bytes;    // bytes read from storage so far, for /metrics (may be empty)
};

class Server {
 public:
  /// `chat` may be empty: then /v1/chat/completions answers 400 saying the model has no chat template.
  Server(Engine& engine, ChatRenderer chat, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds the listening socket; returns the port. Throws ferry::Error when the address cannot be bound.
  int bind();
  /// Serves until stop(); call after bind().
  void listen();
  /// Stops accepting connections and returns from listen() once in-flight handlers ended.
  void stop();
  /// Requests being answered now (completions, streamed or not).
  int64_t active_requests() const noexcept { return active_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Prepared;     // a parsed, tokenized request, ready for the engine
  struct Submitted;    // a request the engine accepted
  struct StreamState;  // a streamed completion between two calls of its content provider

  Prepared prepare(const std::string& body, Endpoint endpoint) const;
  Submitted submit(const std::string& body, Endpoint endpoint);  // prepare, then Engine::submit
  std::string render_metrics_text() const;
  void count(const std::string& endpoint, int status);

  // The routes, set up by the constructor: connections, error answers, /health + /metrics, /v1/models, completions.
  void routes();
  void configure_connections();
  void add_error_handlers();
  void add_health_routes();
  void add_model_routes();
  void add_completion_routes();
  void answer_whole(const std::string& path, const Submitted& sub, const ResponseHeader& h, Clock::time_point deadline,
                    const Usage& usage_prompt, httplib::Response& res);
  void answer_streamed(const std::string& path, const Submitted& sub, const ResponseHeader& h,
                       Clock::time_point arrived, Clock::time_point deadline, const Usage& usage_prompt,
                       httplib::Response& res);
  bool write_next_event(StreamState& st, httplib::DataSink& sink);

  Engine& engine_;
  ChatRenderer chat_;
  ServerOptions options_;
  int listen_socket_ = -1;  // the bound socket (set while binding), to raise its backlog
  std::unique_ptr<httplib::Server> http_;
  std::atomic<int64_t> active_{0};
  std::atomic<uint64_t> serial_{0};
  mutable std::mutex stats_mutex_;
  HttpStats http_stats_;
  uint64_t disk_read_at_start_ = 0;
};

}  // namespace ferry::serve
