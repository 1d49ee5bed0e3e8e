// Parsing and checking OpenAI completion requests (openai_request.h).
#include "serve/openai_request.h"

#include <cmath>
#include <limits>
#include <set>

namespace ferry::serve {

namespace {

using Json = nlohmann::ordered_json;

// `text` with bytes outside printable ASCII written as \xNN: the parser's messages quote the bytes it read, which
// may not be UTF-8, and an error message must be valid JSON text.
std::string printable(std::string_view text) {
  std::string out;
  for (const unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

const char* type_name(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

ApiError wrong_type(const std::string& key, const char* want, const Json& v) {
  return bad_request("'" + key + "' must be " + want + ", not " + type_name(v), key);
}

// A JSON integer (an integral float such as 16.0 too, as Python clients may send it).
int64_t get_int(const Json& v, const std::string& key) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw bad_request("'" + key + "' is too large", key);
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  throw wrong_type(key, "an integer", v);
}

double get_number(const Json& v, const std::string& key, double lo, double hi) {
  if (!v.is_number()) throw wrong_type(key, "a number", v);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    throw bad_request("'" + key + "' must be between " + std::to_string(lo).substr(0, 4) + " and " +
                          std::to_string(hi).substr(0, 4),
                      key);
  return d;
}

bool get_bool(const Json& v, const std::string& key) {
  if (!v.is_boolean()) throw wrong_type(key, "a boolean", v);
  return v.get<bool>();
}

std::string get_string(const Json& v, const std::string& key) {
  if (!v.is_string()) throw wrong_type(key, "a string", v);
  return v.get<std::string>();
}

std::vector<text::TokenId> get_ids(const Json& v, const std::string& key) {
  std::vector<text::TokenId> ids;
  for (const auto& x : v) {
    const int64_t id = get_int(x, key);
    if (id < 0 || id > std::numeric_limits<text::TokenId>::max())
      throw bad_request("'" + key + "' holds the token id " + std::to_string(id) + ", outside the vocabulary", key);
    ids.push_back(static_cast<text::TokenId>(id));
  }
  return ids;
}

// "stop": null, a string, or up to 4 strings (OpenAI's limit), none empty.
std::vector<std::string> get_stop(const Json& v) {
  std::vector<std::string> stop;
  if (v.is_null()) return stop;
  if (v.is_string()) {
    stop.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > 4) throw bad_request("'stop' takes at most 4 sequences", "stop");
    for (const auto& s : v) stop.push_back(get_string(s, "stop"));
  } else {
    throw wrong_type("stop", "a string or an array of strings", v);
  }
  for (const auto& s : stop)
    if (s.empty()) throw bad_request("'stop' sequences must not be empty", "stop");
  return stop;
}

// A message's "content": a string, null, or text parts (joined with "\n", as vLLM does for text-only templates).
Json message_content(const Json& content, const std::string& key) {
  if (content.is_string() || content.is_null()) return content;
  if (!content.is_array()) throw wrong_type(key, "a string or an array of content parts", content);
  std::string joined;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pkey = key + "[" + std::to_string(i) + "]";
    if (!part.is_object()) throw wrong_type(pkey, "an object", part);
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string()) throw bad_request("'" + pkey + ".type' is missing", pkey + ".type");
    if (*type != "text")
      throw bad_request("content parts of type '" + type->get<std::string>() + "' are not supported: this model reads text",
                        pkey + ".type");
    const auto t = part.find("text");
    if (t == part.end()) throw bad_request("'" + pkey + ".text' is missing", pkey + ".text");
    if (i > 0) joined += "\n";
    joined += get_string(*t, pkey + ".text");
  }
  return joined;
}

Json check_messages(const Json& v) {
  if (!v.is_array()) throw wrong_type("messages", "an array", v);
  if (v.empty()) throw bad_request("'messages' must hold at least one message", "messages");
  static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool", "function"};
  Json out = Json::array();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string key = "messages[" + std::to_string(i) + "]";
    const Json& m = v[i];
    if (!m.is_object()) throw wrong_type(key, "an object", m);
    const auto role = m.find("role");
    if (role == m.end()) throw bad_request("'" + key + ".role' is missing", key + ".role");
    const std::string r = get_string(*role, key + ".role");
    if (!roles.count(r)) throw bad_request("'" + key + ".role' is '" + r + "': use system, user, assistant or tool", key + ".role");
    Json copy = m;
    const auto content = m.find("content");
    if (content == m.end()) {
      if (r != "assistant") throw bad_request("'" + key + ".content' is missing", key + ".content");
    } else {
      copy["content"] = message_content(*content, key + ".content");
    }
    out.push_back(std::move(copy));
  }
  return out;
}

// Parameters accepted only at their neutral value: anything else would be silently ignored.
void check_neutral(const Json& body, const std::string& key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return;
  const Json& v = *it;
  bool neutral = false;
  if (key == "n" || key == "best_of") neutral = v.is_number() && v.get<double>() == 1.0;
  else if (key == "presence_penalty" || key == "frequency_penalty") neutral = v.is_number() && v.get<double>() == 0.0;
  else if (key == "logit_bias") neutral = v.is_object() && v.empty();
  else if (key == "echo") neutral = v.is_boolean() && !v.get<bool>();
  else if (key == "suffix") neutral = v.is_string() && v.get<std::string>().empty();
  else if (key == "tool_choice") neutral = v.is_string() && (v == "none" || v == "auto");
  else if (key == "response_format") neutral = v.is_object() && v.value("type", "") == "text";
  if (!neutral)
    throw bad_request("'" + key + "' = " + v.dump() + " is not supported by ferry serve (only its default)", key);
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body_text, Endpoint endpoint) {
  Json body;
  try {
    body = Json::parse(body_text);
  } catch (const nlohmann::json::exception& e) {
    throw bad_request("the body is not valid JSON: " + printable(e.what()));
  }
  if (!body.is_object()) throw bad_request(std::string("the body must be a JSON object, not ") + type_name(body));
  const bool chat = endpoint == Endpoint::ChatCompletions;

  static const std::set<std::string> common = {"model",
                                               "max_tokens",
                                               "temperature",
                                               "top_p",
                                               "top_k",
                                               "min_p",
                                               "repetition_penalty",
                                               "seed",
                                               "stop",
                                               "stream",
                                               "stream_options",
                                               "logprobs",
                                               "user",
                                               "metadata",
                                               "store",
                                               "service_tier",
                                               "n",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "logit_bias",
                                               "prompt_lookup_num_tokens",
                                               "num_assistant_tokens"};
  static const std::set<std::string> chat_only = {"messages", "max_completion_tokens", "top_logprobs", "tools",
                                                   "tool_choice", "parallel_tool_calls", "response_format"};
  static const std::set<std::string> completions_only = {"prompt", "echo", "suffix", "best_of"};
  for (const auto& [key, value] : body.items()) {
    if (common.count(key) || (chat ? chat_only : completions_only).count(key)) continue;
    throw bad_request("unrecognized request argument '" + key + "'", key);
  }
  for (const char* key : {"n", "presence_penalty", "frequency_penalty", "logit_bias"}) check_neutral(body, key);
  for (const char* key : chat ? std::vector<const char*>{"tool_choice", "response_format"}
                              : std::vector<const char*>{"echo", "suffix", "best_of"})
    check_neutral(body, key);

  CompletionRequest r;
  r.endpoint = endpoint;
  const auto model = body.find("model");
  if (model == body.end()) throw bad_request("'model' is missing", "model");
  r.model = get_string(*model, "model");

  if (chat) {
    const auto messages = body.find("messages");
    if (messages == body.end()) throw bad_request("'messages' is missing", "messages");
    r.messages = check_messages(*messages);
    if (const auto t = body.find("tools"); t != body.end() && !t->is_null()) {
      if (!t->is_array()) throw wrong_type("tools", "an array", *t);
      r.tools = *t;
    }
  } else {
    const auto prompt = body.find("prompt");
    if (prompt == body.end()) throw bad_request("'prompt' is missing", "prompt");
    const Json& p = *prompt;
    if (p.is_string()) {
      r.prompt = p.get<std::string>();
    } else if (p.is_array() && !p.empty() && p[0].is_number()) {
      r.prompt_ids = get_ids(p, "prompt");
    } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
      r.prompt = p[0].get<std::string>();
    } else if (p.is_array() && p.size() == 1 && p[0].is_array()) {
      r.prompt_ids = get_ids(p[0], "prompt");
    } else if (p.is_array() && p.size() > 1) {
      throw bad_request("one prompt per request: send a request for each prompt (they are batched together)", "prompt");
    } else {
      throw wrong_type("prompt", "a string or an array of token ids", p);
    }
    if ((r.prompt && r.prompt->empty()) || (r.prompt_ids && r.prompt_ids->empty()))
      throw bad_request("'prompt' is empty", "prompt");
  }

  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    const int64_t n = get_int(*it, key);
    if (n < 1) throw bad_request(std::string("'") + key + "' must be at least 1", key);
    r.max_tokens = n;  // max_completion_tokens (checked second) wins, as in OpenAI's API
  }
  if (const auto it = body.find("temperature"); it != body.end() && !it->is_null())
    r.temperature = get_number(*it, "temperature", 0.0, 2.0);
  if (const auto it = body.find("top_p"); it != body.end() && !it->is_null()) {
    r.top_p = get_number(*it, "top_p", 0.0, 1.0);
    if (r.top_p <= 0) throw bad_request("'top_p' must be greater than 0", "top_p");
  }
  if (const auto it = body.find("top_k"); it != body.end() && !it->is_null()) {
    r.top_k = get_int(*it, "top_k");
    if (r.top_k < 0) throw bad_request("'top_k' must be 0 (off) or more", "top_k");
  }
  if (const auto it = body.find("min_p"); it != body.end() && !it->is_null()) r.min_p = get_number(*it, "min_p", 0.0, 1.0);
  if (const auto it = body.find("repetition_penalty"); it != body.end() && !it->is_null()) {
    r.repetition_penalty = get_number(*it, "repetition_penalty", 0.0, 1.0e6);
    if (r.repetition_penalty <= 0) throw bad_request("'repetition_penalty' must be greater than 0", "repetition_penalty");
  }
  if (const auto it = body.find("seed"); it != body.end() && !it->is_null())
    r.seed = static_cast<uint64_t>(get_int(*it, "seed"));
  for (auto [key, field] : {std::pair{"prompt_lookup_num_tokens", &r.prompt_lookup_num_tokens},
                            std::pair{"num_assistant_tokens", &r.num_assistant_tokens}})
    if (const auto it = body.find(key); it != body.end() && !it->is_null()) {
      *field = get_int(*it, key);
      if (**field < 0 || **field > 64) throw bad_request(std::string("'") + key + "' must lie in [0, 64]", key);
    }
  if (const auto it = body.find("stop"); it != body.end()) r.stop = get_stop(*it);
  if (const auto it = body.find("stream"); it != body.end() && !it->is_null()) r.stream = get_bool(*it, "stream");
  if (const auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) throw wrong_type("stream_options", "an object", *it);
    if (!r.stream) throw bad_request("'stream_options' is only allowed with \"stream\": true", "stream_options");
    for (const auto& [k, v] : it->items()) {
      if (k != "include_usage") throw bad_request("unrecognized argument 'stream_options." + k + "'", "stream_options");
      r.include_usage = get_bool(v, "stream_options.include_usage");
    }
  }
  if (const auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
    if (chat) {
      r.logprobs = get_bool(*it, "logprobs");
    } else {  // the legacy API: an integer, the number of top alternatives (0..5)
      const int64_t n = get_int(*it, "logprobs");
      if (n < 0 || n > 5) throw bad_request("'logprobs' must be between 0 and 5", "logprobs");
      r.logprobs = true;
      r.top_logprobs = n;
    }
  }
  if (const auto it = body.find("top_logprobs"); it != body.end() && !it->is_null()) {
    r.top_logprobs = get_int(*it, "top_logprobs");
    if (r.top_logprobs < 0 || r.top_logprobs > 20) throw bad_request("'top_logprobs' must be between 0 and 20", "top_logprobs");
    if (!r.logprobs) throw bad_request("'top_logprobs' needs \"logprobs\": true", "top_logprobs");
  }
  if (r.logprobs && r.stream)
    throw bad_request("logprobs are returned only without streaming in ferry serve", "logprobs");
  return r;
}

}  // namespace ferry::serve
