#include "envs/mujoco_locomotion.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "core/error.h"

#ifndef MPIRL_WITH_MUJOCO
#define MPIRL_WITH_MUJOCO 0
#endif
// The envs on MuJoCo; a build without it compiles envs/mujoco/unavailable.cpp instead.
#if MPIRL_WITH_MUJOCO
#include <mujoco/mujoco.h>

#include "envs/mujoco/setups.h"

namespace mpirl::envs {

using mujoco_loco::Kind;
using mujoco_loco::kMaxEpisodeSteps;
using mujoco_loco::Setup;
using mujoco_loco::setup_of;

namespace {
// MuJoCo prints its warnings to stdout by default (gymnasium's XMLs give one on loading Ant and
// Humanoid, a deprecated attribute); stdout is the user's, so they go to stderr, named. Its errors
// (a corrupt model, an exhausted arena) end the process, as MuJoCo's default does, without the
// MUJOCO_LOG.TXT it would leave in the working directory: under mpirun the job then stops.
void warn_to_stderr(const char* msg) { std::fprintf(stderr, "mpirl: MuJoCo warning: %s\n", msg); }
[[noreturn]] void error_exit(const char* msg) {
  std::fprintf(stderr, "mpirl: MuJoCo error: %s\n", msg);
  std::fflush(stderr);
  std::exit(1);
}
void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    mju_user_warning = warn_to_stderr;
    mju_user_error = error_exit;
  });
}

// One model per XML file per process, shared read-only by its envs (mj_step takes a const model).
std::shared_ptr<const mjModel> load_model(const std::string& id, const std::string& path) {
  install_handlers();
  // The headers compiled against and the library loaded must be the same release (the wheel was
  // upgraded after the build: rebuild).
  if (mj_version() != mjVERSION_HEADER)
    throw ConfigError(fmt::format("config key 'env.id' = \"{}\": libmujoco is version {} but mpirl was built with the "
                                  "headers of {}: rebuild mpirl (scripts/build.sh) after changing the mujoco wheel",
                                  id, mj_version(), mjVERSION_HEADER));
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const mjModel>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  char err[1024] = "";
  mjModel* m = mj_loadXML(path.c_str(), nullptr, err, sizeof err);
  if (!m)
    throw ConfigError(fmt::format("config key 'env.id' = \"{}\": MuJoCo could not load {}: {} (the XML files "
                                  "are gymnasium's envs/mujoco/assets; set MPIRL_MUJOCO_ASSETS to that folder)",
                                  id, path, err[0] ? err : "no message"));
  std::shared_ptr<const mjModel> p(m, [](const mjModel* x) { mj_deleteModel(const_cast<mjModel*>(x)); });
  cache.emplace(path, p);
  return p;
}
}  // namespace

struct MujocoLocomotion::Impl {
  const Setup* s = nullptr;
  std::shared_ptr<const mjModel> model;
  mjData* d = nullptr;
  std::mt19937_64 rng;
  std::normal_distribution<double> normal{0.0, 1.0};
  int torso = -1;   // Ant: the body whose x-y position gives the velocity
  double dt = 0;    // timestep x frame_skip, as gymnasium's dt
  int64_t steps = 0;
  double mass_total = 0;
  std::vector<double> qpos0_buf, qvel0_buf;  // reset()'s draws

  ~Impl() {
    if (d) mj_deleteData(d);
  }
  const mjModel* m() const { return model.get(); }

  // The x-y position whose change is the forward velocity: qpos[0] for the planar bodies, the
  // torso's frame for Ant (get_body_com), the centre of mass of all bodies for Humanoid.
  void position(double xy[2]) const {
    const mjModel* mm = m();
    switch (s->kind) {
      case Kind::Ant:
        xy[0] = d->xpos[3 * torso], xy[1] = d->xpos[3 * torso + 1];
        return;
      case Kind::Humanoid: {
        double x = 0, y = 0;
        for (int b = 0; b < mm->nbody; ++b) x += mm->body_mass[b] * d->xipos[3 * b], y += mm->body_mass[b] * d->xipos[3 * b + 1];
        xy[0] = x / mass_total, xy[1] = y / mass_total;
        return;
      }
      default:
        xy[0] = d->qpos[0], xy[1] = 0;
    }
  }

  bool healthy() const {
    const mjModel* mm = m();
    switch (s->kind) {
      case Kind::Hopper: {
        double z = d->qpos[1], angle = d->qpos[2];
        for (int i = 2; i < mm->nq; ++i)
          if (!(d->qpos[i] > -100.0 && d->qpos[i] < 100.0)) return false;
        for (int i = 0; i < mm->nv; ++i)
          if (!(d->qvel[i] > -100.0 && d->qvel[i] < 100.0)) return false;
        return z > 0.7 && angle > -0.2 && angle < 0.2;
      }
      case Kind::Walker2d: {
        double z = d->qpos[1], angle = d->qpos[2];
        return z > 0.8 && z < 2.0 && angle > -1.0 && angle < 1.0;
      }
      case Kind::Ant: {
        for (int i = 0; i < mm->nq; ++i)
          if (!std::isfinite(d->qpos[i])) return false;
        for (int i = 0; i < mm->nv; ++i)
          if (!std::isfinite(d->qvel[i])) return false;
        return d->qpos[2] >= 0.2 && d->qpos[2] <= 1.0;
      }
      case Kind::Humanoid:
        return d->qpos[2] > 1.0 && d->qpos[2] < 2.0;
      case Kind::HalfCheetah:
        return true;
    }
    return true;
  }

  void write_obs(float* o) const {
    const mjModel* mm = m();
    auto put = [&o](const mjtNum* x, int n) {
      for (int i = 0; i < n; ++i) *o++ = float(x[i]);
    };
    auto put_clipped = [&o](const mjtNum* x, int n) {
      for (int i = 0; i < n; ++i) *o++ = float(std::min(10.0, std::max(-10.0, x[i])));
    };
    switch (s->kind) {
      case Kind::Hopper:
      case Kind::Walker2d:
        put(d->qpos + 1, mm->nq - 1);
        put_clipped(d->qvel, mm->nv);
        return;
      case Kind::HalfCheetah:
        put(d->qpos + 1, mm->nq - 1);
        put(d->qvel, mm->nv);
        return;
      case Kind::Ant:
        put(d->qpos + 2, mm->nq - 2);
        put(d->qvel, mm->nv);
        return;
      case Kind::Humanoid:
        put(d->qpos + 2, mm->nq - 2);
        put(d->qvel, mm->nv);
        put(d->cinert, 10 * mm->nbody);
        put(d->cvel, 6 * mm->nbody);
        put(d->qfrc_actuator, mm->nv);
        put(d->cfrc_ext, 6 * mm->nbody);
        return;
    }
  }

  int64_t obs_dim() const {
    const mjModel* mm = m();
    switch (s->kind) {
      case Kind::Hopper:
      case Kind::Walker2d:
      case Kind::HalfCheetah:
        return mm->nq - 1 + mm->nv;
      case Kind::Ant:
        return mm->nq - 2 + mm->nv;
      case Kind::Humanoid:
        return mm->nq - 2 + 2 * mm->nv + 22 * mm->nbody;
    }
    return 0;
  }

  // gymnasium's set_state after mj_resetData.
  void set_state(const double* qpos, const double* qvel) {
    const mjModel* mm = m();
    mj_resetData(mm, d);
    for (int i = 0; i < mm->nq; ++i) d->qpos[i] = qpos[i];
    for (int i = 0; i < mm->nv; ++i) d->qvel[i] = qvel[i];
    mj_forward(mm, d);
    steps = 0;
  }
};

MujocoLocomotion::MujocoLocomotion(const std::string& id, uint64_t seed) : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  p.s = &setup_of(id);
  p.model = load_model(id, mujoco_assets_dir() + "/" + p.s->xml);
  p.d = mj_makeData(p.m());  // MuJoCo's error handler ends the process where it cannot
  p.rng.seed(seed);
  p.dt = p.m()->opt.timestep * p.s->frame_skip;
  for (int b = 0; b < p.m()->nbody; ++b) p.mass_total += p.m()->body_mass[b];
  if (p.s->kind == Kind::Ant) {
    p.torso = mj_name2id(p.m(), mjOBJ_BODY, "torso");
    if (p.torso < 0) throw ConfigError(fmt::format("env {}: {} has no body named torso", id, p.s->xml));
  }
  spec_.id = id;
  spec_.obs_shape = {p.obs_dim()};
  spec_.discrete = false;
  spec_.action_dim = p.m()->nu;
  for (int i = 0; i < p.m()->nu; ++i) {
    spec_.action_low.push_back(float(p.m()->actuator_ctrlrange[2 * i]));
    spec_.action_high.push_back(float(p.m()->actuator_ctrlrange[2 * i + 1]));
  }
  spec_.max_episode_steps = kMaxEpisodeSteps;
  spec_.description = p.s->text;
}

MujocoLocomotion::~MujocoLocomotion() = default;
int MujocoLocomotion::nq() const { return impl_->m()->nq; }
int MujocoLocomotion::nv() const { return impl_->m()->nv; }

std::vector<double> MujocoLocomotion::state() const {
  const mjModel* m = impl_->m();
  std::vector<double> q(impl_->d->qpos, impl_->d->qpos + m->nq);
  q.insert(q.end(), impl_->d->qvel, impl_->d->qvel + m->nv);
  return q;
}

bool MujocoLocomotion::healthy_at(const double* qpos, const double* qvel) {
  impl_->set_state(qpos, qvel);
  return impl_->healthy();
}

void MujocoLocomotion::reset_to(const double* qpos, const double* qvel, void* obs) {
  impl_->set_state(qpos, qvel);
  impl_->write_obs(static_cast<float*>(obs));
}

void MujocoLocomotion::reset(void* obs) {
  Impl& p = *impl_;
  const mjModel* m = p.m();
  const double s = p.s->noise;
  std::vector<double>& qpos = p.qpos0_buf;  // scratch kept across resets: no allocation per episode
  std::vector<double>& qvel = p.qvel0_buf;
  qpos.resize(size_t(m->nq)), qvel.resize(size_t(m->nv));
  // init_qpos is the model's qpos0 and init_qvel zero (gymnasium reads them from a fresh MjData);
  // numpy's uniform(low, high) is low + (high - low) U[0, 1).
  auto u = [&p] { return double(p.rng() >> 11) * 0x1.0p-53; };
  for (int i = 0; i < m->nq; ++i) qpos[size_t(i)] = m->qpos0[i] + (-s + 2 * s * u());
  for (int i = 0; i < m->nv; ++i) qvel[size_t(i)] = p.s->normal_qvel ? s * p.normal(p.rng) : -s + 2 * s * u();
  reset_to(qpos.data(), qvel.data(), obs);
}

StepResult MujocoLocomotion::step(const Action& a, void* obs) {
  Impl& p = *impl_;
  const mjModel* m = p.m();
  double before[2], after[2], ctrl_sq = 0;
  p.position(before);
  // Actions are clipped into the bounds (EnvSpec's contract, as the Python path clips before
  // gymnasium and CleanRL's ClipAction does), so the control cost is that of the clipped action.
  for (int i = 0; i < m->nu; ++i) {
    p.d->ctrl[i] = std::clamp(double(a.values[i]), double(spec_.action_low[size_t(i)]), double(spec_.action_high[size_t(i)]));
    ctrl_sq += p.d->ctrl[i] * p.d->ctrl[i];
  }
  for (int k = 0; k < p.s->frame_skip; ++k) mj_step(m, p.d);
  // As gymnasium: force quantities (cfrc_ext, Humanoid's observation) need the post-constraint pass.
  mj_rnePostConstraint(m, p.d);
  p.position(after);
  const double x_velocity = (after[0] - before[0]) / p.dt;
  const bool healthy = p.healthy();
  // The healthy reward is paid on every step of an env that terminates when unhealthy (all here
  // but HalfCheetah, which has none): gymnasium's float(is_healthy or terminate_when_unhealthy).
  double reward = p.s->forward * x_velocity + p.s->healthy - p.s->ctrl_cost * ctrl_sq;
  p.write_obs(static_cast<float*>(obs));
  ++p.steps;
  StepResult r;
  r.reward = float(reward);
  r.terminated = !healthy;
  // mpirl's convention (as CartPole's): a step that terminates is not also truncated, where
  // gymnasium's TimeLimit reports both on a 1000th step that terminates; the learner treats the
  // two the same way (terminated wins: no bootstrap).
  r.truncated = !r.terminated && p.steps >= kMaxEpisodeSteps;
  return r;
}

}  // namespace mpirl::envs

#endif  // MPIRL_WITH_MUJOCO
