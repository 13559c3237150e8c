// sweep.json written and read back (sweep_file.h). The reader is a small strict JSON parser for
// what the writer writes: objects, arrays, strings and integers.
#include "train/sweep/sweep_file.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>

#include "autograd/error.h"
#include "autograd/format.h"

namespace gradlab::train {
namespace {

constexpr const char* kFormat = "gradlab-sweep";
constexpr int64_t kVersion = 1;

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", byte);
      out += code;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_strings(const std::vector<std::string>& texts) {
  std::string out = "[";
  for (size_t i = 0; i < texts.size(); ++i) out += (i ? ", " : "") + json_string(texts[i]);
  return out + "]";
}

// A parsed JSON value: what it holds depends on kind.
struct Json {
  enum Kind { Object, Array, String, Integer } kind = String;
  std::map<std::string, Json> members;
  std::vector<Json> items;
  std::string text;
  int64_t integer = 0;
};

class Parser {
 public:
  Parser(const std::string& text, const std::string& path) : text_(text), path_(path) {}

  Json document() {
    Json value = parse(0);
    skip_space();
    if (at_ < text_.size()) fail("text after the end of the document");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(path_ + ": not a sweep file: " + what + " at byte " + std::to_string(at_));
  }
  void skip_space() {
    while (at_ < text_.size() && std::string_view(" \t\r\n").find(text_[at_]) != std::string::npos)
      ++at_;
  }
  bool take(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }

  Json parse(int depth) {
    if (depth > 8) fail("nested too deeply");
    skip_space();
    if (at_ >= text_.size()) fail("unexpected end");
    Json value;
    const char c = text_[at_];
    if (c == '{') {
      value.kind = Json::Object;
      ++at_;
      if (take('}')) return value;
      do {
        skip_space();
        const std::string key = string();
        expect(':');
        value.members[key] = parse(depth + 1);
      } while (take(','));
      expect('}');
    } else if (c == '[') {
      value.kind = Json::Array;
      ++at_;
      if (take(']')) return value;
      do value.items.push_back(parse(depth + 1));
      while (take(','));
      expect(']');
    } else if (c == '"') {
      value.text = string();
    } else {
      value.kind = Json::Integer;
      const auto [end, error] =
          std::from_chars(text_.data() + at_, text_.data() + text_.size(), value.integer);
      if (error != std::errc()) fail("expected a value");
      at_ = static_cast<size_t>(end - text_.data());
    }
    return value;
  }

  std::string string() {
    if (at_ >= text_.size() || text_[at_] != '"') fail("expected a string");
    std::string out;
    for (++at_; at_ < text_.size() && text_[at_] != '"'; ++at_) {
      if (text_[at_] != '\\') {
        out += text_[at_];
        continue;
      }
      if (++at_ >= text_.size()) break;
      const char e = text_[at_];
      if (e == '"' || e == '\\' || e == '/') {
        out += e;
      } else if (e == 'u' && at_ + 4 < text_.size()) {
        unsigned code = 0;
        const auto [end, error] =
            std::from_chars(text_.data() + at_ + 1, text_.data() + at_ + 5, code, 16);
        if (error != std::errc() || end != text_.data() + at_ + 5 || code >= 0x20) {
          fail("an escape the writer does not write");
        }
        out += static_cast<char>(code);
        at_ += 4;
      } else {
        fail("an escape the writer does not write");
      }
    }
    if (at_ >= text_.size()) fail("a string without its closing quote");
    ++at_;
    return out;
  }

  const std::string& text_;
  const std::string& path_;
  size_t at_ = 0;
};

const Json& member(const Json& object, const std::string& key, Json::Kind kind,
                   const std::string& path) {
  const auto it = object.members.find(key);
  if (object.kind != Json::Object || it == object.members.end() || it->second.kind != kind) {
    throw ConfigError(path + ": not a sweep file: \"" + key + "\" is missing or of another type");
  }
  return it->second;
}

std::vector<std::string> strings(const Json& array, const std::string& key,
                                 const std::string& path) {
  std::vector<std::string> out;
  for (const Json& item : array.items) {
    if (item.kind != Json::String) {
      throw ConfigError(path + ": not a sweep file: \"" + key + "\" holds a non-string");
    }
    out.push_back(item.text);
  }
  return out;
}

std::string grid_text(const std::vector<GridAxis>& grid) {
  std::string out;
  for (const GridAxis& axis : grid) {
    out += (out.empty() ? "" : " ") + axis.key + "=";
    for (size_t i = 0; i < axis.values.size(); ++i) out += (i ? "," : "") + axis.values[i];
  }
  return out.empty() ? "no grid" : "--grid " + out;
}

bool extends(const std::vector<GridAxis>& before, const std::vector<GridAxis>& now) {
  if (before.size() != now.size()) return false;
  for (size_t a = 0; a < now.size(); ++a) {
    if (before[a].key != now[a].key) return false;
    for (const std::string& value : before[a].values) {
      const std::vector<std::string>& values = now[a].values;
      if (std::find(values.begin(), values.end(), value) == values.end()) return false;
    }
  }
  return true;
}

}  // namespace

std::string sweep_json(const SweepSpec& spec) {
  std::string out = "{\n  \"format\": \"" + std::string(kFormat) +
                    "\",\n  \"version\": " + std::to_string(kVersion) +
                    ",\n  \"config\": " + json_string(spec.config) +
                    ",\n  \"flags\": " + json_strings(spec.flags) +
                    ",\n  \"threads\": " + std::to_string(spec.threads) +
                    ",\n  \"seeds\": " + std::to_string(spec.seeds) + ",\n  \"grid\": [";
  for (size_t a = 0; a < spec.grid.size(); ++a) {
    out += std::string(a ? "," : "") + "\n    {\"key\": " + json_string(spec.grid[a].key) +
           ", \"values\": " + json_strings(spec.grid[a].values) + "}";
  }
  out += "\n  ],\n  \"runs\": [";
  const std::vector<SweepPoint> points = sweep_points(spec.grid, spec.seeds);
  for (size_t p = 0; p < points.size(); ++p) {
    out += std::string(p ? "," : "") + "\n    {\"name\": " + json_string(points[p].name()) +
           ", \"seed\": " + std::to_string(points[p].seed) + ", \"values\": {";
    for (size_t v = 0; v < points[p].values.size(); ++v) {
      out += (v ? ", " : "") + json_string(points[p].values[v].first) + ": " +
             json_string(points[p].values[v].second);
    }
    out += "}}";
  }
  return out + "\n  ],\n  \"failed\": " + json_strings(spec.failed) + "\n}\n";
}

SweepSpec read_sweep_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path + ": cannot read it");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Json doc = Parser(text, path).document();
  if (member(doc, "format", Json::String, path).text != kFormat ||
      member(doc, "version", Json::Integer, path).integer != kVersion) {
    throw ConfigError(path + ": not a sweep file of format " + kFormat + " version " +
                      std::to_string(kVersion));
  }
  SweepSpec spec;
  spec.config = member(doc, "config", Json::String, path).text;
  spec.flags = strings(member(doc, "flags", Json::Array, path), "flags", path);
  spec.threads = member(doc, "threads", Json::Integer, path).integer;
  spec.seeds = member(doc, "seeds", Json::Integer, path).integer;
  spec.failed = strings(member(doc, "failed", Json::Array, path), "failed", path);
  for (const Json& axis : member(doc, "grid", Json::Array, path).items) {
    spec.grid.push_back({member(axis, "key", Json::String, path).text,
                         strings(member(axis, "values", Json::Array, path), "values", path)});
  }
  return spec;
}

void check_same_sweep(const SweepSpec& before, const SweepSpec& now, bool extend) {
  const std::string ways = " (run it into another --out";
  if (before.config != now.config) {
    throw ConfigError("the sweep there has --config " + quote(before.config) + ", not " +
                      quote(now.config) + ways + ")");
  }
  if (before.flags != now.flags) {
    std::string given;
    for (const std::string& flag : before.flags) given += (given.empty() ? "" : " ") + flag;
    throw ConfigError("the sweep there gives every run the flags " +
                      quote(given.empty() ? "(none)" : given) + ", not these" + ways + ")");
  }
  if (before.grid == now.grid && before.seeds == now.seeds) return;
  const std::string change = "the sweep there has " + grid_text(before.grid) + " and --seeds " +
                             std::to_string(before.seeds) + ", not " + grid_text(now.grid) +
                             " and --seeds " + std::to_string(now.seeds);
  if (!extend) throw ConfigError(change + ways + ", or pass --extend to add runs to it)");
  if (!extends(before.grid, now.grid) || now.seeds < before.seeds) {
    throw ConfigError(change + "; --extend only adds values to the same keys, or seeds" + ways +
                      ")");
  }
}

}  // namespace gradlab::train
