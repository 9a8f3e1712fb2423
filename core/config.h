#pragma once
// The run configuration: TOML with an embedded default, overridden by a file and `--set` pairs.
// Every key that exists is in configs/default.toml; anything else is an error that names the key.
#include <cstdint>
#include <string>
#include <vector>

namespace mpirl {

struct Config {
  struct Run {
    std::string name, out_dir;
    uint64_t seed = 1;
    int64_t total_env_steps = 0;
    double max_wall_seconds = 0, stop_mean_return = 0, log_interval_s = 2, stall_timeout_s = 120;
    std::string checkpoint = "end", resume = "never", progress = "auto";
    double checkpoint_interval_s = -1;
    int64_t checkpoint_every_updates = 0;
    int64_t curve_interval_steps = 10000;  // curve.jsonl: a point every this many env steps; 0 = off
    int keep_checkpoints = 2;
    bool tensorboard = true;  // learner 0 writes TensorBoard event files into the run directory
  } run;
  struct Roles {
    int learners = 1;
    int replays = 1;  // replay shards (one global sampling distribution over them)
    int inference_per_node = 1;  // inference ranks per host (actor.inference = "central")
    std::string inference_hosts = "each";  // "each" host with actors | the "learners"' hosts
  } roles;
  struct Env {
    std::string id;
    int num_envs = 1, obs_dim = 1, num_actions = 2, episode_length = 1;
    double step_cost_us = 0;
    std::string cost_mode;
    std::string kwargs;  // JSON object: keyword arguments for Python envs (gym:, py:)
  } env;
  struct Actor {
    int rollout_len = 1, max_inflight = 2, threads = 1, param_tests = 0;
    std::string inference = "local";  // "local" (the actor's own CPU) | "central" (inference ranks)
    int env_groups = 1;               // envs split into groups stepped in turn (central: overlapped)
    std::string compress_obs = "auto";  // "auto" (zstd for uint8 images) | "zstd" | "none" (comm/rollout_codec.h)
    int compress_level = 1;             // zstd level of compressed observations
    // Each actor collects its share of the learners' next batch with one version of the parameters,
    // then waits for the next version (actor/actor.cpp: take_turn): policy lag 0, as synchronous PPO.
    bool synchronous = false;
    // Rewards divided by a running standard deviation of the discounted return (actor/reward_norm.h).
    bool reward_norm = false;
  } actor;
  struct Replay {
    int capacity = 1;
    std::string selector, dump, dump_path, restore;
    int64_t max_times_sampled = 1, min_size_to_sample = 0, importance_anneal_items = 0;
    double samples_per_insert = 0, error_buffer = 0, priority_exponent = 0.6, importance_exponent = 0.4;
    double dump_interval_s = 0;
  } replay;
  struct Learner {
    std::string algo, device, optimizer;
    int threads = 1, batch_size = 1, prefetch = 1, publish_interval = 1;
    double lr = 0, adam_beta1 = 0, adam_beta2 = 0, rmsprop_alpha = 0, rmsprop_momentum = 0, eps = 0;
    double max_grad_norm = 0, gamma = 0, rho_bar = 1, c_bar = 1, pg_rho_bar = 1, lambda = 1;
    double value_coef = 0, entropy_coef = 0, appo_clip = 0;
    int appo_epochs = 1, appo_minibatches = 1;
    // APPO's ratio against the policy at the start of each update instead of the actor's (learner/
    // algorithms/appo.h): the clip stays centred on the learner's policy when the batch is stale.
    bool appo_proximal = false;
    // How APPO splits a batch into minibatches: "sequences" (whole sequences, advantages recomputed in
    // every optimizer step) or "steps" (PPO's: advantages and targets once per update, then the
    // batch's steps shuffled into minibatches every epoch; no recurrent core).
    std::string appo_minibatch = "sequences";
    // Schedules over the step budget (learner/schedule.h): "constant", "linear" or "cosine".
    std::string lr_schedule = "constant", entropy_schedule = "constant";
    double lr_final = 0, entropy_coef_final = 0;
    // > 0: after each update the learning rate's factor goes down by 1.5 where the update's KL
    // (behaviour policy || updated policy) exceeds 2 x kl_target and up by 1.5 where it is under
    // kl_target / 2, within [0.01, 10] (learner/trainer.h); 0: off.
    double kl_target = 0;
    // Normalisation (learner/normalizers.h).
    bool normalize_advantages = false;
    std::string advantages = "vtrace";  // APPO's advantage estimator: "vtrace" | "gae" (learner.lambda)
    std::string value_norm = "popart";  // "none" | "popart"
    double value_norm_decay = 3e-4;
    double reward_scale = 1, reward_clip = 0;
    int64_t max_policy_lag = 0;
    double collective_timeout_s = 300;
    bool self_check = true;  // check the scan, the step and the reducer before training; fall back on a mismatch
    bool cuda_graph = true;  // CUDA learners: the optimizer step as a captured CUDA graph
    bool grad_by_hand = true;  // eager CPU steps: the gradient without autograd where the algorithm has
                               // it in closed form (Algorithm::grad_by_hand); false: autograd always
    bool frozen = false;     // batches received and counted, no update: parameters stay fixed (benchmarks)
    std::string on_nonfinite = "skip";  // a non-finite loss or gradient: "skip" | "rollback" | "stop"
    int64_t nonfinite_limit = 100;      // skipped updates in a row before stopping (skip) or rolling back
  } learner;
  struct Model {
    std::string encoder = "auto";
    std::vector<int64_t> hidden;
    std::string activation, core;
    int64_t core_size = 128, core_state = 64;
    bool obs_norm = false;       // running mean/std normalisation of float observations
    double obs_norm_clip = 10;   // normalised observations are clipped to [-clip, clip]
    std::string critic = "shared";  // "shared" torso, or a "separate" MLP of the same widths for the value
    std::string init = "default";   // "default" (LibTorch's) or "orthogonal" (MLP layers and heads)
    double log_std_init = -0.5;     // Gaussian policies: the state-independent log-std at the start
    std::string python;             // "file.py:factory": a PyTorch module instead of the built-in (models/python_model.h)
    bool sparse_input = true;       // uint8 observations into an MLP on the CPU: first layers over their nonzeros
  } model;
  struct R2D2 {  // learner.algo = "r2d2" (learner/algorithms/r2d2/)
    int burn_in = 40;              // first steps of each sequence: the core's state only, no loss, no gradient
    int n_step = 5;                // n of the n-step double-Q targets
    int64_t target_period = 2500;  // optimizer steps between copies of the online network into the target
    double priority_eta = 0.9;     // sequence priority: eta * max|delta| + (1 - eta) * mean|delta|
    double rescale_eps = 1e-3;     // h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x
    double epsilon_base = 0.4, epsilon_alpha = 7;  // env i of N: epsilon = base^(1 + alpha i / (N - 1))
    // "max": new items get the largest priority so far; "actor": the priority the actor computes
    // from its own Q-values (Ape-X; actor/sequence_priority.h)
    std::string initial_priority = "max";
  } r2d2;
  struct Kernels {
    std::string scan_backend = "auto";  // "auto" | "native" | "aten" (kernels/scan.h)
  } kernels;
  struct Inference {  // central inference ranks (inference/server.h)
    int64_t max_batch_rows = 0;  // 0 = no cap beyond what the served actors can have in flight
    double max_wait_us = 500;    // the oldest request waits at most this long for others to batch with
    std::string device = "auto"; // "auto" (a GPU when there is one), "cpu" or "cuda"
    int threads = 1;             // torch intra-op threads on CPU
    double emulate_batch_us = 0, emulate_row_us = 0;  // > 0: no forward pass, a sleep of this cost instead
  } inference;
  struct Eval {  // evaluation during training (learner/evaluator.h)
    double interval_s = 0;  // 0 = off
    int episodes = 10, threads = 1;
    bool greedy = true;
  } eval;

  // The resolved configuration as TOML (defaults + file + overrides); what rank 0 broadcasts and
  // what is written to the run directory.
  std::string resolved_toml;
};

// The default configuration text (configs/default.toml, embedded at build time).
const std::string& default_config_toml();

// Builds a Config from the defaults, an optional file ("" = none) and `key=value` overrides.
// Throws ConfigError naming the file/key and what was expected.
Config load_config(const std::string& file, const std::vector<std::string>& overrides);

// Parses an already resolved TOML text (as broadcast by rank 0, or a run's config.toml). Keys it
// lacks (added to mpirl since it was written) take their defaults and are appended to
// `defaulted`; a text without one of the original sections ([run] to [model]) or env.id is
// refused (ConfigError).
Config parse_resolved_config(const std::string& toml_text, std::vector<std::string>* defaulted = nullptr);

// A run's or checkpoint's config.toml: parse_resolved_config of the file, the path named in any
// error; keys it lacks are listed on stderr ("<path> predates N keys; using their defaults: ...").
Config load_run_config(const std::string& path);

// The keys whose values differ between two resolved configs, with both values as TOML text.
struct ConfigChange {
  std::string key, before, after;
};
std::vector<ConfigChange> config_changes(const std::string& before_toml, const std::string& after_toml);

}  // namespace mpirl
