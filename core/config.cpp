#include "core/config.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <algorithm>
#include <vector>
#include <sstream>

#include <toml++/toml.h>

#include "core/config_schema.h"
#include "core/error.h"

namespace mpirl {
namespace {

using detail::Field;
using detail::Kind;
using detail::schema;

const char kDefaultToml[] =
#include "default_config.inc"
    ;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Int: return "an integer";
    case Kind::Float: return "a number";
    case Kind::String: return "a string";
    case Kind::IntList: return "a list of integers";
    case Kind::Bool: return "true or false";
  }
  return "?";
}

// An integer given as a float (1e6, 2.0): its exact int64 value, or nothing when it has a
// fraction or lies outside int64.
std::optional<int64_t> exact_integer(const toml::node& n) {
  if (n.is_integer()) return *n.value<int64_t>();
  if (!n.is_floating_point()) return std::nullopt;
  const double v = *n.value<double>();
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 9.007199254740992e15) return std::nullopt;
  return static_cast<int64_t>(v);
}

// Levenshtein distance (for "did you mean").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string leaf(const std::string& key) { return key.substr(key.rfind('.') + 1); }

// " (did you mean 'x'?)" for the closest known key or section, or "" when none is close: a small
// edit distance, or the same key name in another section.
std::string did_you_mean(const std::string& key, bool section) {
  std::vector<std::string> names;
  for (const auto& [k, f] : schema()) {
    const std::string name = section ? k.substr(0, k.find('.')) : k;
    if (names.empty() || names.back() != name) names.push_back(name);
  }
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& n : names) {
    size_t d = edit_distance(key, n);
    if (!section && leaf(n) == leaf(key)) d = std::min<size_t>(d, 1);
    if (d < best_d) best_d = d, best = n;
  }
  const size_t limit = std::max<size_t>(2, key.size() / 4);
  return best_d <= limit ? fmt::format(" (did you mean '{}'?)", best) : "";
}

std::string render(const toml::node& n) {
  if (n.is_floating_point()) return fmt::format("{}", *n.value<double>());  // shortest form: 0.0005, not 0.00050000000000000001
  std::ostringstream os;
  n.visit([&](auto&& v) { os << v; });
  return os.str();
}

// Checks one value against its field; `origin` says where it came from (file or --set).
void check_value(const std::string& key, const Field& f, const toml::node& n, const std::string& origin) {
  auto bad = [&](const std::string& expected) {
    throw ConfigError(fmt::format("config key '{}' = {} ({}): expected {}", key, render(n), origin, expected));
  };
  auto range = [&](double v) {
    if (std::isnan(v)) {
      if (!f.allow_nan) bad(fmt::format("{} in [{}, {}], not nan", kind_name(f.kind), f.lo, f.hi));
      return;
    }
    if (v < f.lo || v > f.hi) bad(fmt::format("{} in [{}, {}]", kind_name(f.kind), f.lo, f.hi));
  };
  switch (f.kind) {
    case Kind::Int: {
      const auto v = exact_integer(n);  // 1e6 is 1000000; 2.5 is not an integer
      if (!v) bad(kind_name(f.kind));
      range(double(*v));
      break;
    }
    case Kind::Float:
      if (!n.is_number()) bad(kind_name(f.kind));
      range(*n.value<double>());
      break;
    case Kind::String: {
      if (!n.is_string()) bad(kind_name(f.kind));
      if (!f.choices.empty()) {
        auto v = *n.value<std::string>();
        bool ok = false;
        for (auto& c : f.choices) ok |= (c == v);
        if (!ok) bad(fmt::format("one of \"{}\"", fmt::join(f.choices, "\", \"")));
      }
      break;
    }
    case Kind::Bool:
      if (!n.is_boolean()) bad(kind_name(f.kind));
      break;
    case Kind::IntList: {
      auto* arr = n.as_array();
      if (!arr || arr->empty()) bad("a non-empty list of integers");
      for (auto& e : *arr) {
        const auto i = exact_integer(e);
        if (!i) bad(kind_name(f.kind));
        double v = double(*i);
        if (v < f.lo || v > f.hi) bad(fmt::format("integers in [{}, {}]", f.lo, f.hi));
      }
      break;
    }
  }
}

void merge(toml::table& dst, const toml::table& src, const std::string& prefix, const std::string& origin) {
  for (auto&& [k, v] : src) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (auto* sub = v.as_table()) {
      auto* d = dst.get_as<toml::table>(k.str());
      if (!d) throw ConfigError(fmt::format("unknown config section [{}] ({}){}", key, origin, did_you_mean(key, true)));
      merge(*d, *sub, key, origin);
      continue;
    }
    auto it = schema().find(key);
    if (it == schema().end() || !dst.contains(k.str()))
      throw ConfigError(fmt::format("unknown config key '{}' ({}){}; see configs/default.toml for the keys", key,
                                    origin, did_you_mean(key, false)));
    check_value(key, it->second, v, origin);
    if (it->second.kind == Kind::Int && v.is_floating_point()) {  // stored as the integer it equals
      dst.insert_or_assign(k.str(), *exact_integer(v));
    } else if (it->second.kind == Kind::IntList) {
      toml::array ints;
      for (auto& e : *v.as_array()) ints.push_back(*exact_integer(e));
      dst.insert_or_assign(k.str(), std::move(ints));
    } else {
      dst.insert_or_assign(k.str(), v);
    }
  }
}

toml::table parse_text(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& r = e.source();
    throw ConfigError(fmt::format("{}:{}:{}: TOML syntax error: {}", origin, r.begin.line, r.begin.column,
                                  e.description()));
  }
}

void apply_override(toml::table& tbl, const std::string& kv) {
  auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(fmt::format("--set '{}': expected section.key=value", kv));
  std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
  auto dot = key.find('.');
  if (dot == std::string::npos)
    throw ConfigError(fmt::format("--set '{}': key '{}' must be section.key", kv, key));
  // Parse the value as TOML; a bare word that is not valid TOML is taken as a string.
  toml::table one;
  try {
    one = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    one.insert_or_assign("v", value);
  }
  toml::table wrapped;
  toml::table* cur = &wrapped;
  std::string rest = key;
  while ((dot = rest.find('.')) != std::string::npos) {
    auto [it, _] = cur->insert_or_assign(rest.substr(0, dot), toml::table{});
    cur = it->second.as_table();
    rest = rest.substr(dot + 1);
  }
  cur->insert_or_assign(rest, *one.get("v"));
  merge(tbl, wrapped, "", "--set " + kv);
}

Config extract(const toml::table& tbl) {
  Config c;
  for (auto& [key, field] : schema()) {
    auto node = tbl.at_path(key);
    MPIRL_CHECK(node.node() != nullptr, "default config lacks key {}", key);
    field.set(c, *node.node());
  }
  std::ostringstream os;
  os << tbl;
  c.resolved_toml = os.str();
  return c;
}

void cross_validate(const Config& c) {
  auto bad = [](const std::string& m) { throw ConfigError(m); };
  if (c.learner.batch_size > c.replay.capacity)
    bad(fmt::format("config key 'learner.batch_size' = {}: expected at most replay.capacity = {}",
                    c.learner.batch_size, c.replay.capacity));
  if (c.learner.algo == "appo" && c.learner.batch_size % c.learner.appo_minibatches != 0)
    bad(fmt::format("config key 'learner.appo_minibatches' = {}: expected a divisor of learner.batch_size = {}",
                    c.learner.appo_minibatches, c.learner.batch_size));
  if (c.env.num_envs > c.replay.capacity)
    bad(fmt::format("config key 'env.num_envs' = {}: expected at most replay.capacity = {} (one rollout must fit)",
                    c.env.num_envs, c.replay.capacity));
  if (c.run.name.find('/') != std::string::npos || c.run.name == "." || c.run.name == "..")
    bad(fmt::format("config key 'run.name' = \"{}\": expected a plain directory name", c.run.name));
  if (c.actor.env_groups > c.env.num_envs)
    bad(fmt::format("config key 'actor.env_groups' = {}: expected at most env.num_envs = {} (each group steps at "
                    "least one env)",
                    c.actor.env_groups, c.env.num_envs));
}

}  // namespace

const std::string& default_config_toml() {
  static const std::string s(kDefaultToml);
  return s;
}

Config load_config(const std::string& file, const std::vector<std::string>& overrides) {
  toml::table tbl = parse_text(default_config_toml(), "<default config>");
  if (!file.empty()) {
    toml::table user;
    try {
      user = toml::parse_file(file);
    } catch (const toml::parse_error& e) {
      const auto& r = e.source();
      throw ConfigError(fmt::format("{}:{}:{}: {}", file, r.begin.line, r.begin.column, e.description()));
    }
    merge(tbl, user, "", file);
  }
  for (auto& kv : overrides) apply_override(tbl, kv);
  Config c = extract(tbl);
  cross_validate(c);
  return c;
}

Config parse_resolved_config(const std::string& toml_text, std::vector<std::string>* defaulted) {
  // A run's config.toml written before a key existed loads (for eval, export and the replay
  // tools), that key at its default and listed in `defaulted`; keys this version does not know
  // are ignored, as before. Text that lacks one of the sections every mpirl wrote, or env.id, is
  // not a resolved config ([kernels], [eval] and [inference] came later: older runs lack them).
  const toml::table text = parse_text(toml_text, "<resolved config>");
  toml::table tbl = parse_text(default_config_toml(), "<default config>");
  for (const char* section : {"run", "roles", "env", "actor", "replay", "learner", "model"})
    if (!text.get_as<toml::table>(section))
      throw ConfigError(fmt::format("not a complete resolved config: no [{}] section", section));
  if (!text.at_path("env.id").node()) throw ConfigError("not a complete resolved config: no env.id");
  for (const auto& [key, field] : schema()) {
    const size_t dot = key.find('.');
    auto node = text.at_path(key);
    if (!node.node()) {
      if (defaulted) defaulted->push_back(key);
      continue;
    }
    // The same type and range checks as `mpirl train` (a hand-edited or damaged config.toml
    // names its key instead of crashing eval, export or the replay tools).
    check_value(key, field, *node.node(), "the run's config");
    auto* section = tbl.get_as<toml::table>(key.substr(0, dot));
    if (field.kind == Kind::Int && node.node()->is_floating_point()) {
      section->insert_or_assign(key.substr(dot + 1), *exact_integer(*node.node()));
    } else if (field.kind == Kind::IntList) {
      toml::array ints;
      for (auto& e : *node.node()->as_array()) ints.push_back(*exact_integer(e));
      section->insert_or_assign(key.substr(dot + 1), std::move(ints));
    } else {
      section->insert_or_assign(key.substr(dot + 1), *node.node());
    }
  }
  Config c = extract(tbl);
  cross_validate(c);
  return c;
}

std::vector<ConfigChange> config_changes(const std::string& before_toml, const std::string& after_toml) {
  const toml::table a = parse_text(before_toml, "the checkpoint's config"), b = parse_text(after_toml, "the new config");
  std::vector<ConfigChange> out;
  for (const auto& [key, field] : schema()) {
    auto na = a.at_path(key), nb = b.at_path(key);
    // A key newer than the checkpoint is "(absent)" there, so it counts as changed unless it may
    // change on resume: today's default need not be what the code did before the key existed.
    const std::string va = na.node() ? render(*na.node()) : "(absent)", vb = nb.node() ? render(*nb.node()) : "(absent)";
    if (va != vb) out.push_back({key, va, vb});
  }
  return out;
}

}  // namespace mpirl
