#include "core/config_schema.h"

namespace mpirl::detail {
namespace {

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

Field bool_field(std::function<void(Config&, bool)> f) {
  return Field{Kind::Bool, 0, 0, {}, false, [f](Config& c, const toml::node& n) { f(c, *n.value<bool>()); }};
}

}  // namespace

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
    m["run.curve_interval_steps"] = int_field(0, 9.0e15, [](Config& c, int64_t v) { c.run.curve_interval_steps = v; });
    m["run.stall_timeout_s"] = float_field(0, 1e9, [](Config& c, double v) { c.run.stall_timeout_s = v; });
    m["run.checkpoint"] = string_field({"end", "never"}, [](Config& c, std::string v) { c.run.checkpoint = v; });
    m["run.checkpoint_interval_s"] = float_field(-1, 1e9, [](Config& c, double v) { c.run.checkpoint_interval_s = v; });
    m["run.checkpoint_every_updates"] =
        int_field(0, int64_t(1) << 40, [](Config& c, int64_t v) { c.run.checkpoint_every_updates = v; });
    m["run.keep_checkpoints"] = int_field(1, 1000, [](Config& c, int64_t v) { c.run.keep_checkpoints = int(v); });
    m["run.resume"] = string_field({"never", "auto"}, [](Config& c, std::string v) { c.run.resume = v; });
    m["run.progress"] = string_field({"auto", "bar", "lines"}, [](Config& c, std::string v) { c.run.progress = v; });
    m["run.tensorboard"] = bool_field([](Config& c, bool v) { c.run.tensorboard = v; });
    m["roles.learners"] = int_field(1, 4096, [](Config& c, int64_t v) { c.roles.learners = int(v); });
    m["roles.replays"] = int_field(1, 4096, [](Config& c, int64_t v) { c.roles.replays = int(v); });
    m["roles.inference_per_node"] = int_field(1, 1024, [](Config& c, int64_t v) { c.roles.inference_per_node = int(v); });
    m["roles.inference_hosts"] = string_field({"each", "learners"}, [](Config& c, std::string v) { c.roles.inference_hosts = v; });
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
    m["actor.param_tests"] = int_field(0, 4096, [](Config& c, int64_t v) { c.actor.param_tests = int(v); });
    m["actor.inference"] = string_field({"local", "central"}, [](Config& c, std::string v) { c.actor.inference = v; });
    m["actor.reward_norm"] = bool_field([](Config& c, bool v) { c.actor.reward_norm = v; });
    m["actor.synchronous"] = bool_field([](Config& c, bool v) { c.actor.synchronous = v; });
    m["actor.env_groups"] = int_field(1, 1024, [](Config& c, int64_t v) { c.actor.env_groups = int(v); });
    m["actor.compress_obs"] = string_field({"auto", "zstd", "none"}, [](Config& c, std::string v) { c.actor.compress_obs = v; });
    m["actor.compress_level"] = int_field(-7, 19, [](Config& c, int64_t v) { c.actor.compress_level = int(v); });
    m["inference.max_batch_rows"] = int_field(0, 1 << 24, [](Config& c, int64_t v) { c.inference.max_batch_rows = v; });
    m["inference.max_wait_us"] = float_field(0, 1e7, [](Config& c, double v) { c.inference.max_wait_us = v; });
    m["inference.device"] = string_field({"auto", "cpu", "cuda"}, [](Config& c, std::string v) { c.inference.device = v; });
    m["inference.threads"] = int_field(1, 256, [](Config& c, int64_t v) { c.inference.threads = int(v); });
    m["inference.emulate_batch_us"] = float_field(0, 1e7, [](Config& c, double v) { c.inference.emulate_batch_us = v; });
    m["inference.emulate_row_us"] = float_field(0, 1e6, [](Config& c, double v) { c.inference.emulate_row_us = v; });
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
    m["learner.algo"] = string_field({"impala", "appo", "r2d2"}, [](Config& c, std::string v) { c.learner.algo = v; });
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
    m["learner.collective_timeout_s"] = float_field(1, inf, [](Config& c, double v) { c.learner.collective_timeout_s = v; });
    m["learner.cuda_graph"] = bool_field([](Config& c, bool v) { c.learner.cuda_graph = v; });
    m["learner.grad_by_hand"] = bool_field([](Config& c, bool v) { c.learner.grad_by_hand = v; });
    m["learner.self_check"] = bool_field([](Config& c, bool v) { c.learner.self_check = v; });
    m["learner.frozen"] = bool_field([](Config& c, bool v) { c.learner.frozen = v; });
    m["learner.on_nonfinite"] = string_field({"skip", "rollback", "stop"},
                                             [](Config& c, std::string v) { c.learner.on_nonfinite = v; });
    m["learner.nonfinite_limit"] = int_field(1, 1e9, [](Config& c, int64_t v) { c.learner.nonfinite_limit = v; });
    m["kernels.scan_backend"] =
        string_field({"auto", "native", "aten"}, [](Config& c, std::string v) { c.kernels.scan_backend = v; });
    m["learner.gamma"] = float_field(0, 1, [](Config& c, double v) { c.learner.gamma = v; });
    m["learner.rho_bar"] = float_field(1e-6, inf, [](Config& c, double v) { c.learner.rho_bar = v; });
    m["learner.c_bar"] = float_field(1e-6, inf, [](Config& c, double v) { c.learner.c_bar = v; });
    m["learner.pg_rho_bar"] = float_field(1e-6, inf, [](Config& c, double v) { c.learner.pg_rho_bar = v; });
    m["learner.lambda"] = float_field(0, 1, [](Config& c, double v) { c.learner.lambda = v; });
    m["learner.value_coef"] = float_field(0, inf, [](Config& c, double v) { c.learner.value_coef = v; });
    m["learner.entropy_coef"] = float_field(0, inf, [](Config& c, double v) { c.learner.entropy_coef = v; });
    m["learner.publish_interval"] = int_field(1, 1 << 20, [](Config& c, int64_t v) { c.learner.publish_interval = int(v); });
    m["learner.appo_clip"] = float_field(1e-6, 10, [](Config& c, double v) { c.learner.appo_clip = v; });
    m["learner.appo_proximal"] = bool_field([](Config& c, bool v) { c.learner.appo_proximal = v; });
    m["learner.appo_epochs"] = int_field(1, 1000, [](Config& c, int64_t v) { c.learner.appo_epochs = int(v); });
    m["learner.appo_minibatch"] = string_field({"sequences", "steps"}, [](Config& c, std::string v) { c.learner.appo_minibatch = v; });
    m["learner.appo_minibatches"] = int_field(1, 1 << 16, [](Config& c, int64_t v) { c.learner.appo_minibatches = int(v); });
    m["learner.lr_schedule"] = string_field({"constant", "linear", "cosine"},
                                            [](Config& c, std::string v) { c.learner.lr_schedule = v; });
    m["learner.lr_final"] = float_field(0, 10, [](Config& c, double v) { c.learner.lr_final = v; });
    m["learner.kl_target"] = float_field(0, 10, [](Config& c, double v) { c.learner.kl_target = v; });
    m["learner.entropy_schedule"] = string_field({"constant", "linear", "cosine"},
                                                 [](Config& c, std::string v) { c.learner.entropy_schedule = v; });
    m["learner.entropy_coef_final"] = float_field(0, inf, [](Config& c, double v) { c.learner.entropy_coef_final = v; });
    m["learner.advantages"] = string_field({"vtrace", "gae"}, [](Config& c, std::string v) { c.learner.advantages = v; });
    m["learner.normalize_advantages"] = bool_field([](Config& c, bool v) { c.learner.normalize_advantages = v; });
    m["learner.value_norm"] = string_field({"none", "popart"}, [](Config& c, std::string v) { c.learner.value_norm = v; });
    m["learner.value_norm_decay"] = float_field(1e-6, 1, [](Config& c, double v) { c.learner.value_norm_decay = v; });
    m["learner.reward_scale"] = float_field(1e-9, 1e9, [](Config& c, double v) { c.learner.reward_scale = v; });
    m["learner.reward_clip"] = float_field(0, inf, [](Config& c, double v) { c.learner.reward_clip = v; });
    m["learner.max_policy_lag"] = int_field(0, 9.0e15, [](Config& c, int64_t v) { c.learner.max_policy_lag = v; });
    m["model.hidden"] = Field{Kind::IntList, 1, 1 << 16, {}, false, [](Config& c, const toml::node& n) {
                                c.model.hidden.clear();
                                for (auto& e : *n.as_array()) c.model.hidden.push_back(*e.value<int64_t>());
                              }};
    m["model.encoder"] = string_field({"auto", "mlp", "nature_cnn", "impala_cnn", "minatar_cnn"},
                                      [](Config& c, std::string v) { c.model.encoder = v; });
    m["model.activation"] = string_field({"tanh", "relu"}, [](Config& c, std::string v) { c.model.activation = v; });
    m["model.core"] = string_field({"none", "gru", "lstm", "lru", "ssm", "mingru", "ffm"},
                                   [](Config& c, std::string v) { c.model.core = v; });
    m["model.core_size"] = int_field(1, 1 << 16, [](Config& c, int64_t v) { c.model.core_size = v; });
    m["model.core_state"] = int_field(1, 1 << 16, [](Config& c, int64_t v) { c.model.core_state = v; });
    m["model.init"] = string_field({"default", "orthogonal"}, [](Config& c, std::string v) { c.model.init = v; });
    m["model.log_std_init"] = float_field(-20, 5, [](Config& c, double v) { c.model.log_std_init = v; });
    m["model.critic"] = string_field({"shared", "separate"}, [](Config& c, std::string v) { c.model.critic = v; });
    m["model.python"] = string_field({}, [](Config& c, std::string v) { c.model.python = v; });
    m["model.sparse_input"] = bool_field([](Config& c, bool v) { c.model.sparse_input = v; });
    m["model.obs_norm"] = bool_field([](Config& c, bool v) { c.model.obs_norm = v; });
    m["model.obs_norm_clip"] = float_field(1e-3, 1e9, [](Config& c, double v) { c.model.obs_norm_clip = v; });
    m["r2d2.burn_in"] = int_field(0, 1 << 16, [](Config& c, int64_t v) { c.r2d2.burn_in = int(v); });
    m["r2d2.n_step"] = int_field(1, 1 << 16, [](Config& c, int64_t v) { c.r2d2.n_step = int(v); });
    m["r2d2.target_period"] = int_field(1, 9.0e15, [](Config& c, int64_t v) { c.r2d2.target_period = v; });
    m["r2d2.priority_eta"] = float_field(0, 1, [](Config& c, double v) { c.r2d2.priority_eta = v; });
    m["r2d2.rescale_eps"] = float_field(0, 1, [](Config& c, double v) { c.r2d2.rescale_eps = v; });
    m["r2d2.epsilon_base"] = float_field(0, 1, [](Config& c, double v) { c.r2d2.epsilon_base = v; });
    m["r2d2.initial_priority"] =
        string_field({"max", "actor"}, [](Config& c, std::string v) { c.r2d2.initial_priority = v; });
    m["r2d2.epsilon_alpha"] = float_field(0, 1000, [](Config& c, double v) { c.r2d2.epsilon_alpha = v; });
    m["eval.interval_s"] = float_field(0, 1e9, [](Config& c, double v) { c.eval.interval_s = v; });
    m["eval.episodes"] = int_field(1, 100000, [](Config& c, int64_t v) { c.eval.episodes = int(v); });
    m["eval.threads"] = int_field(1, 256, [](Config& c, int64_t v) { c.eval.threads = int(v); });
    m["eval.greedy"] = bool_field([](Config& c, bool v) { c.eval.greedy = v; });
    return m;
  }();
  return s;
}

}  // namespace mpirl::detail
