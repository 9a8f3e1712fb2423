#include "core/config.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include <toml++/toml.h>

#include "core/error.h"

namespace mpirl {
namespace {

const char kDefaultToml[] =
#include "default_config.inc"
    ;

enum class Kind { Int, Float, String, IntList };

struct Field {
  Kind kind;
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices;  // for strings; empty = any
  bool allow_nan = false;
  std::function<void(Config&, const toml::node&)> set;
};

using Schema = std::map<std::string, Field>;

Field int_field(double lo, double hi, std::function<void(Config&, int64_t)> f) {
  return Field{Kind::Int, lo, hi, {}, false,
               [f](Config& c, const toml::node& n) { f(c, *n.value<int64_t>()); }};
}
Field float_field(double lo, double hi, std::function<void(Config&, double)> f, bool allow_nan = false) {
  return Field{Kind::Float, lo, hi, {}, allow_nan,
               [f](Config& c, const toml::node& n) { f(c, *n.value<double>()); }};
}
Field string_field(std::vector<std::string> choices, std::function<void(Config&, std::string)> f) {
  return Field{Kind::String, 0, 0, std::move(choices), false,
               [f](Config& c, const toml::node& n) { f(c, *n.value<std::string>()); }};
}

const Schema& schema() {
  static const Schema s = [] {
    const double inf = std::numeric_limits<double>::infinity();
    Schema m;
    m["run.name"] = string_field({}, [](Config& c, std::string v) { c.run.name = v; });
    m["run.out_dir"] = string_field({}, [](Config& c, std::string v) { c.run.out_dir = v; });
    m["run.seed"] = int_field(0, 9.0e15, [](Config& c, int64_t v) { c.run.seed = uint64_t(v); });
    m["run.total_env_steps"] = int_field(1, 9.0e15, [](Config& c, int64_t v) { c.run.total_env_steps = v; });
    m["run.max_wall_seconds"] = float_field(0, inf, [](Config& c, double v) { c.run.max_wall_seconds = v; });
    m["run.stop_mean_return"] = float_field(-inf, inf, [](Config& c, double v) { c.run.stop_mean_return = v; }, true);
    m["run.log_interval_s"] = float_field(0.05, 3600, [](Config& c, double v) { c.run.log_interval_s = v; });
    m["run.stall_timeout_s"] = float_field(0, 1e9, [](Config& c, double v) { c.run.stall_timeout_s = v; });
    m["run.checkpoint"] = string_field({"end", "never"}, [](Config& c, std::string v) { c.run.checkpoint = v; });
    m["run.checkpoint_interval_s"] = float_field(0, 1e9, [](Config& c, double v) { c.run.checkpoint_interval_s = v; });
    m["run.keep_checkpoints"] = int_field(1, 1000, [](Config& c, int64_t v) { c.run.keep_checkpoints = int(v); });
    m["run.resume"] = string_field({"never", "auto"}, [](Config& c, std::string v) { c.run.resume = v; });
    m["roles.learners"] = int_field(1, 4096, [](Config& c, int64_t v) { c.roles.learners = int(v); });
    m["env.id"] = string_field({}, [](Config& c, std::string v) { c.env.id = v; });
    m["env.num_envs"] = int_field(1, 65536, [](Config& c, int64_t v) { c.env.num_envs = int(v); });
    m["env.obs_dim"] = int_field(1, 1 << 20, [](Config& c, int64_t v) { c.env.obs_dim = int(v); });
    m["env.num_actions"] = int_field(2, 1 << 16, [](Config& c, int64_t v) { c.env.num_actions = int(v); });
    m["env.episode_length"] = int_field(1, 1e9, [](Config& c, int64_t v) { c.env.episode_length = int(v); });
    m["env.step_cost_us"] = float_field(0, 1e7, [](Config& c, double v) { c.env.step_cost_us = v; });
    m["env.cost_mode"] = string_field({"busy", "sleep"}, [](Config& c, std::string v) { c.env.cost_mode = v; });
    m["env.kwargs"] = string_field({}, [](Config& c, std::string v) { c.env.kwargs = v; });
    m["actor.rollout_len"] = int_field(1, 1 << 16, [](Config& c, int64_t v) { c.actor.rollout_len = int(v); });
    m["actor.max_inflight"] = int_field(1, 64, [](Config& c, int64_t v) { c.actor.max_inflight = int(v); });
    m["actor.threads"] = int_field(1, 256, [](Config& c, int64_t v) { c.actor.threads = int(v); });
    m["replay.capacity"] = int_field(1, 1 << 30, [](Config& c, int64_t v) { c.replay.capacity = int(v); });
    m["replay.selector"] = string_field({"fifo", "uniform", "prioritized"}, [](Config& c, std::string v) { c.replay.selector = v; });
    m["replay.max_times_sampled"] = int_field(0, 9.0e15, [](Config& c, int64_t v) { c.replay.max_times_sampled = v; });
    m["replay.min_size_to_sample"] = int_field(0, 1 << 30, [](Config& c, int64_t v) { c.replay.min_size_to_sample = v; });
    m["replay.samples_per_insert"] = float_field(0, 1e6, [](Config& c, double v) { c.replay.samples_per_insert = v; });
    m["replay.error_buffer"] = float_field(0, 1e12, [](Config& c, double v) { c.replay.error_buffer = v; });
    m["replay.priority_exponent"] = float_field(0, 10, [](Config& c, double v) { c.replay.priority_exponent = v; });
    m["replay.importance_exponent"] = float_field(0, 1, [](Config& c, double v) { c.replay.importance_exponent = v; });
    m["replay.importance_anneal_items"] = int_field(0, 9.0e15, [](Config& c, int64_t v) { c.replay.importance_anneal_items = v; });
    m["replay.dump"] = string_field({"end", "never"}, [](Config& c, std::string v) { c.replay.dump = v; });
    m["replay.dump_interval_s"] = float_field(0, 1e9, [](Config& c, double v) { c.replay.dump_interval_s = v; });
    m["replay.dump_path"] = string_field({}, [](Config& c, std::string v) { c.replay.dump_path = v; });
    m["replay.restore"] = string_field({}, [](Config& c, std::string v) { c.replay.restore = v; });
    m["learner.algo"] = string_field({"impala", "appo"}, [](Config& c, std::string v) { c.learner.algo = v; });
    m["learner.device"] = string_field({"auto", "cpu", "cuda"}, [](Config& c, std::string v) { c.learner.device = v; });
    m["learner.threads"] = int_field(1, 256, [](Config& c, int64_t v) { c.learner.threads = int(v); });
    m["learner.batch_size"] = int_field(1, 1 << 20, [](Config& c, int64_t v) { c.learner.batch_size = int(v); });
    m["learner.prefetch"] = int_field(1, 64, [](Config& c, int64_t v) { c.learner.prefetch = int(v); });
    m["learner.optimizer"] = string_field({"adam", "rmsprop"}, [](Config& c, std::string v) { c.learner.optimizer = v; });
    m["learner.lr"] = float_field(1e-12, 10, [](Config& c, double v) { c.learner.lr = v; });
    m["learner.adam_beta1"] = float_field(0, 0.999999, [](Config& c, double v) { c.learner.adam_beta1 = v; });
    m["learner.adam_beta2"] = float_field(0, 0.999999, [](Config& c, double v) { c.learner.adam_beta2 = v; });
    m["learner.rmsprop_alpha"] = float_field(0, 0.999999, [](Config& c, double v) { c.learner.rmsprop_alpha = v; });
    m["learner.rmsprop_momentum"] = float_field(0, 0.999999, [](Config& c, double v) { c.learner.rmsprop_momentum = v; });
    m["learner.eps"] = float_field(1e-12, 1, [](Config& c, double v) { c.learner.eps = v; });
    m["learner.max_grad_norm"] = float_field(0, inf, [](Config& c, double v) { c.learner.max_grad_norm = v; });
    m["learner.gamma"] = float_field(0, 1, [](Config& c, double v) { c.learner.gamma = v; });
    m["learner.rho_bar"] = float_field(1e-6, inf, [](Config& c, double v) { c.learner.rho_bar = v; });
    m["learner.c_bar"] = float_field(1e-6, inf, [](Config& c, double v) { c.learner.c_bar = v; });
    m["learner.lambda"] = float_field(0, 1, [](Config& c, double v) { c.learner.lambda = v; });
    m["learner.value_coef"] = float_field(0, inf, [](Config& c, double v) { c.learner.value_coef = v; });
    m["learner.entropy_coef"] = float_field(0, inf, [](Config& c, double v) { c.learner.entropy_coef = v; });
    m["learner.publish_interval"] = int_field(1, 1 << 20, [](Config& c, int64_t v) { c.learner.publish_interval = int(v); });
    m["learner.appo_clip"] = float_field(1e-6, 10, [](Config& c, double v) { c.learner.appo_clip = v; });
    m["learner.appo_epochs"] = int_field(1, 1000, [](Config& c, int64_t v) { c.learner.appo_epochs = int(v); });
    m["learner.appo_minibatches"] = int_field(1, 1 << 16, [](Config& c, int64_t v) { c.learner.appo_minibatches = int(v); });
    m["learner.max_policy_lag"] = int_field(0, 9.0e15, [](Config& c, int64_t v) { c.learner.max_policy_lag = v; });
    m["model.hidden"] = Field{Kind::IntList, 1, 1 << 16, {}, false, [](Config& c, const toml::node& n) {
                                c.model.hidden.clear();
                                for (auto& e : *n.as_array()) c.model.hidden.push_back(*e.value<int64_t>());
                              }};
    m["model.encoder"] = string_field({"auto", "mlp", "nature_cnn", "impala_cnn"},
                                      [](Config& c, std::string v) { c.model.encoder = v; });
    m["model.activation"] = string_field({"tanh", "relu"}, [](Config& c, std::string v) { c.model.activation = v; });
    m["model.core"] = string_field({"none", "gru", "lstm", "lru", "ssm", "mingru", "ffm"},
                                   [](Config& c, std::string v) { c.model.core = v; });
    m["model.core_size"] = int_field(1, 1 << 16, [](Config& c, int64_t v) { c.model.core_size = v; });
    m["model.core_state"] = int_field(1, 1 << 16, [](Config& c, int64_t v) { c.model.core_state = v; });
    return m;
  }();
  return s;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Int: return "an integer";
    case Kind::Float: return "a number";
    case Kind::String: return "a string";
    case Kind::IntList: return "a list of integers";
  }
  return "?";
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
    case Kind::Int:
      if (!n.is_integer()) bad(kind_name(f.kind));
      range(double(*n.value<int64_t>()));
      break;
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
    case Kind::IntList: {
      auto* arr = n.as_array();
      if (!arr || arr->empty()) bad("a non-empty list of integers");
      for (auto& e : *arr) {
        if (!e.is_integer()) bad(kind_name(f.kind));
        double v = double(*e.value<int64_t>());
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
      if (!d) throw ConfigError(fmt::format("unknown config section [{}] ({})", key, origin));
      merge(*d, *sub, key, origin);
      continue;
    }
    auto it = schema().find(key);
    if (it == schema().end() || !dst.contains(k.str()))
      throw ConfigError(fmt::format("unknown config key '{}' ({}); see configs/default.toml for the keys", key, origin));
    check_value(key, it->second, v, origin);
    dst.insert_or_assign(k.str(), v);
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

Config parse_resolved_config(const std::string& toml_text) {
  return extract(parse_text(toml_text, "<resolved config>"));
}

std::vector<ConfigChange> config_changes(const std::string& before_toml, const std::string& after_toml) {
  const toml::table a = parse_text(before_toml, "the checkpoint's config"), b = parse_text(after_toml, "the new config");
  std::vector<ConfigChange> out;
  for (const auto& [key, field] : schema()) {
    auto na = a.at_path(key), nb = b.at_path(key);
    const std::string va = na.node() ? render(*na.node()) : "(absent)", vb = nb.node() ? render(*nb.node()) : "(absent)";
    if (va != vb) out.push_back({key, va, vb});
  }
  return out;
}

}  // namespace mpirl
