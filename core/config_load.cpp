// Loading the configuration: the embedded default with a file and --set pairs merged into it, each
// value checked (core/config_check.h); a resolved config parsed back; two resolved configs compared.
#include "core/config.h"

#include <sstream>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "core/config_check.h"
#include "core/config_schema.h"
#include "core/error.h"

namespace mpirl {
namespace {

using detail::check_value;
using detail::did_you_mean;
using detail::exact_integer;
using detail::Kind;
using detail::render;
using detail::schema;

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
  if (c.learner.algo == "appo" && c.learner.appo_minibatch == "sequences" &&
      c.learner.batch_size % c.learner.appo_minibatches != 0)
    bad(fmt::format("config key 'learner.appo_minibatches' = {}: expected a divisor of learner.batch_size = {}",
                    c.learner.appo_minibatches, c.learner.batch_size));
  if (c.learner.advantages == "gae" && c.learner.algo != "appo")
    bad(fmt::format("config key 'learner.advantages' = \"gae\": expected learner.algo = \"appo\" (algo is \"{}\": "
                    "IMPALA's policy gradient needs V-trace's off-policy correction)", c.learner.algo));
  if (c.learner.appo_proximal && c.learner.algo != "appo")
    bad(fmt::format("config key 'learner.appo_proximal' = true: expected learner.algo = \"appo\" (algo is \"{}\", "
                    "which has no clipped ratio to centre)", c.learner.algo));
  if (c.learner.kl_target > 0 && c.learner.algo != "appo")
    bad(fmt::format("config key 'learner.kl_target' = {}: expected learner.algo = \"appo\" (algo is \"{}\"; the "
                    "rate follows the KL of APPO's updates)", c.learner.kl_target, c.learner.algo));
  if (c.learner.appo_minibatch == "steps") {
    const std::string key = "config key 'learner.appo_minibatch' = \"steps\": ";
    if (c.learner.algo != "appo")
      bad(fmt::format("{}expected learner.algo = \"appo\" (algo is \"{}\")", key, c.learner.algo));
    if (c.model.core != "none" || !c.model.python.empty())
      bad(key + "expected a policy without memory (model.core = \"none\", no model.python): a shuffled step has "
                "no core state to start from");
    const int64_t steps = int64_t(c.learner.batch_size) * c.actor.rollout_len;
    if (steps % c.learner.appo_minibatches != 0)
      bad(fmt::format("{}learner.appo_minibatches = {} must divide the batch's steps (learner.batch_size x "
                      "actor.rollout_len = {})", key, c.learner.appo_minibatches, steps));
  }
  if (c.actor.synchronous) {
    // Every batch must be exactly the sequences the actors collected for it: otherwise a learner
    // waits for sequences that actors waiting for its parameters never send.
    const std::string key = "config key 'actor.synchronous' = true: ";
    if (c.learner.algo == "r2d2")
      bad(key + "expected learner.algo = \"appo\" or \"impala\" (R2D2 learns from a replay of old sequences)");
    if (c.replay.selector != "fifo" || c.replay.max_times_sampled != 1 || c.replay.samples_per_insert != 0)
      bad(key + "expected the replay as a queue (replay.selector = \"fifo\", replay.max_times_sampled = 1, "
                "replay.samples_per_insert = 0): each batch is the sequences collected for it, each taken once");
    if (c.replay.min_size_to_sample > c.learner.batch_size)
      bad(fmt::format("{}expected replay.min_size_to_sample = {} to be at most learner.batch_size = {} (0: the batch "
                      "size): the actors send one batch per update", key, c.replay.min_size_to_sample,
                      c.learner.batch_size));
    if (c.learner.publish_interval != 1)
      bad(fmt::format("{}expected learner.publish_interval = 1 (it is {}): the actors wait for the parameters of "
                      "every update", key, c.learner.publish_interval));
    if (c.learner.frozen)
      bad(key + "learner.frozen = true never makes new parameters for the actors to wait for");
    if (c.actor.inference != "local")
      bad(key + "expected actor.inference = \"local\" (the actors must see the parameters' version they act with)");
    if (c.roles.replays != 1)
      bad(fmt::format("{}expected roles.replays = 1 (it is {}): the shards would each hold part of a batch", key,
                      c.roles.replays));
    if (c.roles.learners != 1)
      bad(fmt::format("{}expected roles.learners = 1 (it is {}): the replay serves the learners' requests in the "
                      "order they come, so one learner could take two batches of a version and the other none",
                      key, c.roles.learners));
    if (!c.replay.restore.empty())
      bad(key + "expected no replay.restore: the restored sequences would make every later batch part old");
  }
  if (c.learner.algo == "r2d2" && c.learner.value_norm != "none")
    bad("config key 'learner.value_norm' = \"popart\": learner.algo = \"r2d2\" needs \"none\" (its Q-values are "
        "rescaled by h instead: r2d2.rescale_eps)");
  if (c.learner.algo == "r2d2" && 2 * c.r2d2.burn_in > c.actor.rollout_len)
    bad(fmt::format("config key 'r2d2.burn_in' = {}: expected at most half of actor.rollout_len = {} (each rollout "
                    "repeats the last burn_in steps of the one before, and starts its burn-in from the core state "
                    "the actor had there, which it records while stepping the new steps)",
                    c.r2d2.burn_in, c.actor.rollout_len));
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
