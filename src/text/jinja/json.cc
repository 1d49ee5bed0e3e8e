// JSON into template values (ordered objects) and Python's json.dumps out of them, byte for byte as transformers'
// tojson filter writes it (ensure_ascii=False by default, ", " / ": " separators, "," with an indent).
#include <algorithm>
#include <cstdio>

#include "text/jinja/builtins.h"
#include "text/jinja/failure.h"
#include "text/jinja/utf8.h"

namespace ferry::text::jinja {

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& item : j) items.push_back(from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictItems items;
      for (const auto& [k, v] : j.items()) items.emplace_back(Value::string(k), from_json(v));
      return Value::dict(std::move(items));
    }
    default: return Value::none();
  }
}

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (const char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char buf[16];
        if (c < 0x20) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else if (ensure_ascii && c >= 0x7F) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          }
          out += buf;
        } else {
          utf8_append(out, c);
        }
      }
    }
  }
  out += '"';
}

std::string json_float(double f) {
  if (f != f) return "NaN";
  if (f == HUGE_VAL) return "Infinity";
  if (f == -HUGE_VAL) return "-Infinity";
  return float_repr(f);
}

struct Dumper {
  bool ensure_ascii;
  const std::optional<std::string>& indent;
  const std::string& item_sep;
  const std::string& key_sep;
  bool sort_keys;
  std::string out;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *indent;
  }

  void dump(const Value& v, int level) {
    if (level > 256) fail("Circular reference detected (or a value nested too deeply for tojson)");
    if (out.size() > Limits::kMaxOutput) fail("the JSON text exceeds the output limit");
    switch (v.kind()) {
      case Value::Kind::None: out += "null"; return;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::Int: out += std::to_string(v.as_int()); return;
      case Value::Kind::Float: out += json_float(v.as_float()); return;
      case Value::Kind::String: json_string(out, v.as_string(), ensure_ascii); return;
      case Value::Kind::List: {
        const List& items = v.as_list();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        if (indent) newline(level + 1);
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i) {
            out += item_sep;
            if (indent) newline(level + 1);
          }
          dump(items[i], level + 1);
        }
        if (indent) newline(level);
        out += ']';
        return;
      }
      case Value::Kind::Dict: {
        std::vector<std::pair<std::string, const Value*>> items;
        for (const auto& [k, item] : v.as_dict()) {
          std::string key;
          switch (k.kind()) {
            case Value::Kind::String: key = k.as_string(); break;
            case Value::Kind::Int: key = std::to_string(k.as_int()); break;
            case Value::Kind::Float: key = json_float(k.as_float()); break;
            case Value::Kind::Bool: key = k.as_bool() ? "true" : "false"; break;
            case Value::Kind::None: key = "null"; break;
            default: fail("keys must be str, int, float, bool or None, not " + k.type_name());
          }
          items.emplace_back(std::move(key), &item);
        }
        if (sort_keys) {
          std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        if (items.empty()) {
          out += "{}";
          return;
        }
        out += '{';
        if (indent) newline(level + 1);
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i) {
            out += item_sep;
            if (indent) newline(level + 1);
          }
          json_string(out, items[i].first, ensure_ascii);
          out += key_sep;
          dump(*items[i].second, level + 1);
        }
        if (indent) newline(level);
        out += '}';
        return;
      }
      default: fail("Object of type " + v.type_name() + " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json(const Value& v, bool ensure_ascii, const std::optional<std::string>& indent,
                    const std::string& item_sep, const std::string& key_sep, bool sort_keys) {
  Dumper d{ensure_ascii, indent, item_sep, key_sep, sort_keys, {}};
  d.dump(v, 0);
  return std::move(d.out);
}

}  // namespace ferry::text::jinja
