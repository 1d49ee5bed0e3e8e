// ApiError: a request the server refuses, with the HTTP status and the OpenAI error object it answers with.
//
// OpenAI's shape: {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens", "code": null}}.
// Every refusal of the server — a malformed body, a wrong key, an unknown model, a full queue — is one of these; the
// server answers it and goes on serving everyone else.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace ferry::serve {

class ApiError : public std::runtime_error {
 public:
  /// status: 400, 401, 404, 413, 429, 500, 503, ...; type: "invalid_request_error", "authentication_error",
  /// "not_found_error", "server_error", ...; param: the request field concerned (may be empty); code: OpenAI's
  /// machine-readable code such as "context_length_exceeded" (may be empty).
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = {},
           std::string code = {})
      : std::runtime_error(message), status_(status), type_(std::move(type)), param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const noexcept { return status_; }
  const std::string& type() const noexcept { return type_; }
  const std::string& param() const noexcept { return param_; }
  const std::string& code() const noexcept { return code_; }

  /// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
  nlohmann::json body() const {
    nlohmann::json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
    if (!param_.empty()) e["param"] = param_;
    if (!code_.empty()) e["code"] = code_;
    return {{"error", e}};
  }

 private:
  int status_;
  std::string type_, param_, code_;
};

/// 400 invalid_request_error naming `param`.
inline ApiError bad_request(std::string message, std::string param = {}, std::string code = {}) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

}  // namespace ferry::serve
