// The HTTP routes of `ferry serve` (server.h).
#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <ctime>
#include <random>

#include "ferry/core/error.h"
#include "serve/openai_response.h"

namespace ferry::serve {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Server::Prepared {
  CompletionRequest request;
  std::vector<text::TokenId> ids;
  text::GenerateOptions options;
};

namespace {

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status() == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status(), e.body());
}

// A request that did not finish within --request-timeout (unstreamed: the 504 response; streamed: the last event).
ApiError timeout_error() {
  return ApiError(504, "the request did not finish within the server's --request-timeout", "server_error", {},
                  "timeout");
}

std::string endpoint_path(Endpoint e) {
  return e == Endpoint::ChatCompletions ? "/v1/chat/completions" : "/v1/completions";
}

ApiError context_exceeded(int64_t context, int64_t prompt, int64_t max_tokens) {
  std::string m = "This model's maximum context length is " + std::to_string(context) + " tokens. However, you requested " +
                  std::to_string(prompt + max_tokens) + " tokens (" + std::to_string(prompt) + " in the prompt, " +
                  std::to_string(max_tokens) + " in the completion). Please reduce the prompt or max_tokens.";
  if (max_tokens == 0)
    m = "This model's maximum context length is " + std::to_string(context) + " tokens. However, the prompt has " +
        std::to_string(prompt) + " tokens, which leaves no room for a completion. Please reduce the prompt.";
  return bad_request(m, max_tokens == 0 ? "messages" : "max_tokens", "context_length_exceeded");
}

}  // namespace

Server::Server(Engine& engine, ChatRenderer chat, ServerOptions options)
    : engine_(engine), chat_(std::move(chat)), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  if (options_.disk_read_bytes) disk_read_at_start_ = options_.disk_read_bytes();
  routes();
}

Server::~Server() = default;

namespace {

// The /metrics label of a request path: one of the server's routes, or "other". Never the raw path: any client could
// create a new series per random path (unbounded memory and exposition) or put quotes and newlines in a label.
std::string route_label(const std::string& path) {
  for (const char* route : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"})
    if (path == route) return path;
  if (path.rfind("/v1/models/", 0) == 0 && path.size() > 11 && path.find('/', 11) == std::string::npos)
    return "/v1/models/{id}";
  return "other";
}

}  // namespace

void Server::count(const std::string& endpoint, int status) {
  const std::string label = route_label(endpoint);
  std::lock_guard lock(stats_mutex_);
  ++http_stats_.requests[{label, status}];
}

Server::Prepared Server::prepare(const std::string& body, Endpoint endpoint) const {
  Prepared p;
  p.request = parse_completion_request(body, endpoint);
  const CompletionRequest& r = p.request;
  bool known = r.model == options_.model_id;
  for (const auto& a : options_.model_aliases) known = known || r.model == a;
  if (!known)
    throw ApiError(404, "The model '" + r.model + "' does not exist: this server serves '" + options_.model_id + "'",
                   "invalid_request_error", "model", "model_not_found");

  const text::Tokenizer* tok = engine_.tokenizer();
  if (endpoint == Endpoint::ChatCompletions) {
    if (!chat_)
      throw bad_request("this model has no chat template (no chat_template in tokenizer_config.json, no "
                        "chat_template.jinja): use /v1/completions with a prompt",
                        "messages", "no_chat_template");
    if (!tok) throw bad_request("this model has no tokenizer.json: chat needs one", "messages");
    std::string prompt;
    try {
      prompt = chat_(r.messages, r.tools);
    } catch (const Error& e) {
      throw bad_request(std::string("the chat template refused the messages: ") + e.what(), "messages");
    }
    p.ids = tok->encode(prompt, /*add_special_tokens=*/false);  // the template writes BOS itself, as transformers
  } else if (r.prompt_ids) {
    p.ids = *r.prompt_ids;
  } else {
    if (!tok) throw bad_request("this model has no tokenizer.json: send the prompt as token ids", "prompt");
    p.ids = tok->encode(*r.prompt, /*add_special_tokens=*/true);
  }
  if (p.ids.empty()) throw bad_request("the prompt has no tokens", endpoint == Endpoint::ChatCompletions ? "messages" : "prompt");
  if (tok) {
    for (text::TokenId id : p.ids)
      if (static_cast<std::size_t>(id) >= tok->vocab_size())
        throw bad_request("the prompt holds the token id " + std::to_string(id) + ", outside the vocabulary of " +
                              std::to_string(tok->vocab_size()),
                          "prompt");
  }

  const auto n = static_cast<int64_t>(p.ids.size());
  const int64_t ctx = engine_.context();
  if (n >= ctx) throw context_exceeded(ctx, n, 0);
  int64_t max_new = 0;
  if (r.max_tokens) {
    if (*r.max_tokens > ctx - n) throw context_exceeded(ctx, n, *r.max_tokens);
    max_new = *r.max_tokens;
  } else if (endpoint == Endpoint::Completions) {
    max_new = std::min<int64_t>(16, ctx - n);  // OpenAI's default for completions
  } else {
    max_new = ctx == std::numeric_limits<int64_t>::max() ? options_.default_max_tokens_unbounded : ctx - n;
  }

  text::GenerateOptions& o = p.options;
  o.sampling.do_sample = r.temperature > 0;
  if (r.temperature > 0) o.sampling.temperature = static_cast<float>(r.temperature);
  o.sampling.top_k = static_cast<std::size_t>(r.top_k);
  o.sampling.top_p = static_cast<float>(r.top_p);
  o.sampling.min_p = static_cast<float>(r.min_p);
  o.sampling.repetition_penalty = static_cast<float>(r.repetition_penalty);
  o.sampling.seed = r.seed ? *r.seed : std::random_device{}();
  o.speculative = options_.speculative;
  if (r.prompt_lookup_num_tokens) o.speculative.lookup_tokens = *r.prompt_lookup_num_tokens;
  if (r.num_assistant_tokens) {
    if (*r.num_assistant_tokens > 0 && !options_.speculative.draft)
      throw bad_request("this server has no draft model for 'num_assistant_tokens' (ferry serve --draft-model DIR)",
                        "num_assistant_tokens");
    if (*r.num_assistant_tokens == 0) o.speculative.draft = nullptr;
    else o.speculative.max_proposals = *r.num_assistant_tokens;
  }
  o.stop.max_new_tokens = static_cast<std::size_t>(max_new);
  o.stop.eos_token_ids = options_.eos_token_ids;
  o.stop.stop_strings = r.stop;
  o.skip_special_tokens = true;
  if (r.logprobs) {
    const std::size_t vocab = tok ? tok->vocab_size() : 0;
    if (vocab > 0 && static_cast<std::size_t>(max_new) * vocab > (std::size_t{64} << 20))
      throw bad_request("logprobs keep every step's logits: ask for at most " +
                            std::to_string((std::size_t{64} << 20) / vocab) + " tokens (max_tokens) with logprobs",
                        "max_tokens");
    o.record_logits = static_cast<std::size_t>(max_new);
  }
  return p;
}

std::string Server::render_metrics_text() const {
  HttpStats h;
  {
    std::lock_guard lock(stats_mutex_);
    h = http_stats_;
  }
  h.streamed_bytes_per_forward = options_.streamed_bytes_per_forward;
  if (options_.disk_read_bytes) h.disk_read_bytes = options_.disk_read_bytes() - disk_read_at_start_;
  return render_metrics(engine_.stats(), h);
}

// A completion request the engine accepted: what is left of Server::prepare's result once it is submitted.
struct Server::Submitted {
  CompletionRequest request;
  int64_t prompt_tokens = 0;
  std::shared_ptr<RequestStream> stream;
};

// A streamed completion between two calls of its content provider.
struct Server::StreamState {
  std::shared_ptr<RequestStream> stream;
  ResponseHeader header;
  bool include_usage = false, role_sent = false, first_text = true;
  Clock::time_point arrived, deadline;
  Usage usage;
};

Server::Submitted Server::submit(const std::string& body, Endpoint endpoint) {
  Prepared p = prepare(body, endpoint);
  std::shared_ptr<RequestStream> stream = engine_.submit(p.ids, p.options);
  return Submitted{std::move(p.request), static_cast<int64_t>(p.ids.size()), std::move(stream)};
}

void Server::routes() {
  configure_connections();
  add_error_handlers();
  add_health_routes();
  add_model_routes();
  add_completion_routes();
}

// Worker threads, keep-alive and the listening socket (server.h says why connections close by default).
void Server::configure_connections() {
  httplib::Server& s = *http_;
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_tcp_nodelay(true);
  const int threads = options_.threads > 0 ? options_.threads : static_cast<int>(engine_.max_requests() + 8);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
  if (options_.keep_alive_seconds > 0) {
    s.set_keep_alive_timeout(options_.keep_alive_seconds);
    s.set_keep_alive_max_count(1000);
  } else {
    s.set_keep_alive_max_count(1);  // the first response closes the connection ("Connection: close")
  }
  s.set_socket_options([this](socket_t sock) {
    const int yes = 1;  // rebind at once after a restart (TIME_WAIT), but never share a port (no SO_REUSEPORT)
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = sock;
  });
}

// The answers no route gives: a wrong API key, httplib's own errors (no route, body too large) and exceptions a
// handler let through, all as OpenAI-shaped JSON errors.
void Server::add_error_handlers() {
  httplib::Server& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "Incorrect API key provided: pass the server's --api-key as 'Authorization: Bearer KEY'",
                             "invalid_request_error", {}, "invalid_api_key"));
    count(req.path, 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) {
      const std::string limit = std::to_string(options_.max_body_bytes);
      send_error(res, ApiError(413, "the request body is over the limit of " + limit + " bytes",
                               "invalid_request_error", {}, "request_too_large"));
    } else if (res.status == 404) {
      send_error(res, ApiError(404, "no route for " + req.method + " " + req.path, "invalid_request_error", {}, "not_found"));
    } else {
      send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status), "invalid_request_error"));
    }
    count(req.path, res.status);
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, "internal error: " + what, "server_error"));
  });
}

// GET /health and /metrics.
void Server::add_health_routes() {
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (engine_.draining()) {
      send_json(res, 503, {{"status", "shutting down"}});
    } else {
      const EngineStats st = engine_.stats();
      send_json(res, 200, {{"status", "ok"}, {"running", st.running}, {"waiting", st.waiting}});
    }
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics_text(), "text/plain; version=0.0.4");
  });
}

// GET /v1/models and /v1/models/{id}.
void Server::add_model_routes() {
  const int64_t started = static_cast<int64_t>(std::time(nullptr));
  auto model_object = [this, started] {
    json model{{"id", options_.model_id}, {"object", "model"}, {"created", started}, {"owned_by", "ferry"}};
    if (!options_.model_details.is_null()) model["ferry"] = options_.model_details;
    return model;
  };
  http_->Get("/v1/models", [this, model_object](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_object()})}});
    count(req.path, 200);
  });
  http_->Get(R"(/v1/models/(.+))", [this, model_object](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != options_.model_id) {
      send_error(res, ApiError(404, "The model '" + id + "' does not exist", "invalid_request_error", "model",
                               "model_not_found"));
      count("/v1/models/{id}", 404);
      return;
    }
    send_json(res, 200, model_object());
    count("/v1/models/{id}", 200);
  });
}

// POST /v1/chat/completions and /v1/completions.
void Server::add_completion_routes() {
  for (Endpoint endpoint : {Endpoint::ChatCompletions, Endpoint::Completions}) {
    const std::string path = endpoint_path(endpoint);
    http_->Post(path, [this, endpoint, path](const httplib::Request& req, httplib::Response& res) {
      const auto arrived = Clock::now();
      Submitted sub;
      try {
        sub = submit(req.body, endpoint);
      } catch (const ApiError& e) {
        send_error(res, e);
        count(path, e.status());
        return;
      } catch (const Error& e) {
        send_error(res, bad_request(e.what()));
        count(path, 400);
        return;
      }
      ResponseHeader h{response_id(endpoint, serial_.fetch_add(1) + 1), static_cast<int64_t>(std::time(nullptr)),
                       options_.model_id, endpoint};
      const auto deadline = arrived + options_.request_timeout;
      const Usage usage_prompt{sub.prompt_tokens, 0};
      if (sub.request.stream) {
        answer_streamed(path, sub, h, arrived, deadline, usage_prompt, res);
      } else {
        answer_whole(path, sub, h, deadline, usage_prompt, res);
      }
    });
  }
}

// An unstreamed completion: waits for the whole sequence (or the deadline) and answers with one JSON body.
void Server::answer_whole(const std::string& path, const Submitted& sub, const ResponseHeader& h,
                          Clock::time_point deadline, const Usage& usage_prompt, httplib::Response& res) {
  RequestStream& stream = *sub.stream;
  ++active_;
  struct Done {
    std::atomic<int64_t>& n;
    ~Done() { --n; }
  } done{active_};
  if (!stream.wait_finished(deadline)) {
    stream.cancel();
    send_error(res, timeout_error());
    count(path, 504);
    return;
  }
  const text::SequenceResult& r = stream.result();
  if (!r.ok()) {
    const int status = stream.server_failed() ? 500 : 400;
    send_error(res, ApiError(status, r.error, status == 500 ? "server_error" : "invalid_request_error"));
    count(path, status);
    return;
  }
  Usage u = usage_prompt;
  u.completion_tokens = static_cast<int64_t>(r.result.generated_ids.size());
  json logprobs = nullptr;
  if (sub.request.logprobs)
    logprobs = logprobs_json(h.endpoint, engine_.tokenizer(), r.result.generated_ids, r.result.step_logits,
                             sub.request.top_logprobs);
  send_json(res, 200, full_response(h, r.result.text, r.result.stop_reason, u, logprobs));
  count(path, 200);
}

// A streamed completion: server-sent events from a content provider that runs on this connection's thread until the
// stream ends or the client goes.
void Server::answer_streamed(const std::string& path, const Submitted& sub, const ResponseHeader& h,
                             Clock::time_point arrived, Clock::time_point deadline, const Usage& usage_prompt,
                             httplib::Response& res) {
  auto st = std::make_shared<StreamState>();
  st->stream = sub.stream;
  st->header = h;
  st->include_usage = sub.request.include_usage;
  st->arrived = arrived;
  st->deadline = deadline;
  st->usage = usage_prompt;
  ++active_;
  count(path, 200);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [this, st](std::size_t, httplib::DataSink& sink) { return write_next_event(*st, sink); },
      [this, st](bool success) {
        if (!success) st->stream->cancel();  // disconnected (or the server stopped) before the end
        --active_;
      });
}

// One call of a streamed completion's content provider: writes the next event(s). False: the client is gone.
bool Server::write_next_event(StreamState& st, httplib::DataSink& sink) {
  auto write = [&](std::string_view s) { return sink.write(s.data(), s.size()); };
  auto end = [&](const std::string& last) {
    write(last);
    write(kSseDone);
    sink.done();
    return true;
  };
  if (!st.role_sent && st.header.endpoint == Endpoint::ChatCompletions) {
    st.role_sent = true;
    if (!write(sse_event(text_chunk(st.header, "", true)))) return false;
    return true;
  }
  std::string text;
  const auto wake = std::min(st.deadline, Clock::now() + std::chrono::seconds(1));
  switch (st.stream->next(text, wake)) {
    case RequestStream::Wait::Text: {
      if (st.first_text) {
        st.first_text = false;
        std::lock_guard lock(stats_mutex_);
        http_stats_.ttft_seconds_sum +=
            std::chrono::duration<double>(st.stream->first_token_time() - st.arrived).count();
        ++http_stats_.ttft_count;
      }
      return write(sse_event(text_chunk(st.header, text, false)));  // false: the client is gone
    }
    case RequestStream::Wait::Timeout:
      if (Clock::now() < st.deadline) return sink.is_writable();
      st.stream->cancel();
      return end(sse_event(timeout_error().body()));
    case RequestStream::Wait::Finished:
      // Finished after its deadline (before this handler looked): the deadline rules, as unstreamed.
      if (st.stream->finished_at() > st.deadline) return end(sse_event(timeout_error().body()));
      break;
  }
  const text::SequenceResult& r = st.stream->result();
  if (!r.ok())
    return end(sse_event(ApiError(st.stream->server_failed() ? 500 : 400, r.error,
                                  st.stream->server_failed() ? "server_error" : "invalid_request_error")
                             .body()));
  std::string last = sse_event(final_chunk(st.header, r.result.stop_reason));
  if (st.include_usage) {
    Usage u = st.usage;
    u.completion_tokens = static_cast<int64_t>(r.result.generated_ids.size());
    last += sse_event(usage_chunk(st.header, u));
  }
  return end(last);
}

int Server::bind() {
  int port = options_.port;
  bool ok = false;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    ok = port > 0;
  } else {
    ok = http_->bind_to_port(options_.host, port);
  }
  if (!ok)
    throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port), "serve",
                "is another server using the port? pass --port (0 = any free port) or --host");
  // cpp-httplib listens with a backlog of 5: a burst of 32 clients connecting at once overflowed it, the kernel fell
  // back to SYN cookies and reset some of the connections ("Connection reset by peer" in the client). Listening
  // again on the bound socket only raises the backlog.
  if (listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
  return port;
}

void Server::listen() { http_->listen_after_bind(); }

void Server::stop() { http_->stop(); }

}  // namespace ferry::serve
