// Learner parts that need no MPI: truncation bootstraps valued with the current parameters,
// gradient clipping without a host sync (against LibTorch's clip_grad_norm_), the publish schedule.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/device.h"
#include "learner/algorithms/appo.h"
#include "learner/algorithms/impala.h"
#include "learner/publish_schedule.h"
#include "learner/trainer.h"

using namespace mpirl;
using namespace mpirl::learner;

namespace {
TrainBatch batch(int64_t T, int64_t B, int64_t D) {
  TrainBatch b;
  b.obs = torch::randn({T + 1, B, D});
  b.is_init = torch::zeros({T + 1, B});
  b.actions = torch::zeros({T, B}, torch::kInt64);
  b.rewards = torch::ones({T, B});
  b.terminated = torch::zeros({T, B});
  b.truncated = torch::zeros({T, B});
  b.behaviour_logp = torch::full({T, B}, std::log(0.5));
  return b;
}
}  // namespace

TEST(Trainer, TruncationBootstrapUsesTheCurrentParameters) {
  for (const char* core : {"none", "lru"}) {
    SCOPED_TRACE(core);
    Config cfg = load_config("", {std::string("model.core=\"") + core + "\"", "model.core_state=4", "model.core_size=8"});
    auto spec = envs::env_spec(cfg);
    NoReducer none;
    Trainer tr(cfg, spec, torch::kCPU, none);
    auto& pol = tr.policy();
    const int64_t T = 4, B = 3, D = spec.obs_size(), S = pol->state_size();
    auto b = batch(T, B, D);
    b.truncated[2][1] = 1;
    b.truncated[3][0] = 1;
    BootInputs boot;
    boot.obs = torch::randn({2, D});
    if (S > 0) boot.state = torch::randn({2, S});
    boot.t = torch::tensor({2, 3}, torch::kInt64);
    boot.b = torch::tensor({1, 0}, torch::kInt64);
    boot.count = 2;
    tr.bootstrap(b, boot);
    torch::NoGradGuard g;
    auto want = pol->value_after(boot.obs, boot.state);
    EXPECT_FLOAT_EQ(b.trunc_value[2][1].item<float>(), want[0].item<float>());
    EXPECT_FLOAT_EQ(b.trunc_value[3][0].item<float>(), want[1].item<float>());
    EXPECT_EQ(b.trunc_value.abs().sum().item<float>(),
              std::abs(want[0].item<float>()) + std::abs(want[1].item<float>()));  // zeros elsewhere
    // New parameters, new bootstrap values: the value head's bias moves every value by 0.5.
    for (auto& item : pol->named_parameters())
      if (item.key() == "v.bias") item.value().add_(0.5);
    tr.bootstrap(b, boot);
    EXPECT_NEAR(b.trunc_value[2][1].item<float>(), want[0].item<float>() + 0.5f, 1e-6);
    EXPECT_NEAR(b.trunc_value[3][0].item<float>(), want[1].item<float>() + 0.5f, 1e-6);
  }
}

// learner.pg_rho_bar reaches IMPALA's policy gradient: behaviour probabilities of 0.1 against a
// near-uniform 2-action policy make every rho about 5; clipped at 1 the policy loss is
// -mean(logp * adv), unclipped -mean(logp * (pi / 0.1) * adv), with pi from the same initial policy.
TEST(Trainer, PgRhoBarClipsThePolicyGradientsImportanceWeights) {
  auto policy_loss = [](const std::string& pg_rho_bar, torch::Tensor* logp) {
    Config cfg = load_config("", {"learner.pg_rho_bar=" + pg_rho_bar, "learner.value_norm=\"none\""});
    auto spec = envs::env_spec(cfg);
    NoReducer none;
    torch::manual_seed(5);
    Trainer tr(cfg, spec, torch::kCPU, none, StepMode::Eager);
    torch::manual_seed(6);
    auto b = batch(4, 3, spec.obs_size());
    b.behaviour_logp.fill_(std::log(0.1));
    if (logp) {
      torch::NoGradGuard g;
      auto out = tr.policy()->unroll(b.obs, b.is_init, tr.policy()->initial_state(3));
      *logp = models::log_prob(spec, out.dist.slice(0, 0, 4), b.actions);
    }
    return tr.update(b, {}).last.policy.item<double>();
  };
  torch::Tensor logp;
  const double clipped = policy_loss("1.0", &logp), unclipped = policy_loss("1000", nullptr);
  auto rho = logp.exp() / 0.1;
  ASSERT_GT(rho.min().item<double>(), 4.0);  // every weight is clipped at 1, none at 1000
  // Rewards of 1 and fresh values make every advantage positive, so the ratio of the two losses is
  // a positively weighted mean of rho: within its range, and 1 if pg_rho_bar were not applied.
  EXPECT_GT(std::abs(clipped), 1e-3);
  EXPECT_GE(unclipped / clipped, rho.min().item<double>() - 1e-4);
  EXPECT_LE(unclipped / clipped, rho.max().item<double>() + 1e-4);
}

TEST(Trainer, ClipGradNormMatchesLibTorch) {
  torch::manual_seed(3);
  for (double max_norm : {0.1, 1.0, 100.0}) {
    std::vector<torch::Tensor> a, b;
    for (auto shape : {std::vector<int64_t>{3, 4}, {7}, {2, 2, 2}}) {
      auto g = torch::randn(shape) * 3;
      auto pa = torch::zeros(shape, torch::requires_grad()), pb = torch::zeros(shape, torch::requires_grad());
      pa.mutable_grad() = g.clone();
      pb.mutable_grad() = g.clone();
      a.push_back(pa);
      b.push_back(pb);
    }
    double ref = torch::nn::utils::clip_grad_norm_(b, max_norm);
    auto norm = clip_grad_norm(a, max_norm);
    EXPECT_NEAR(norm.item<double>(), ref, 1e-5 * ref);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i].grad(), b[i].grad(), 1e-5, 1e-6));
  }
}

TEST(PublishSchedule, ADuePublishWaitsForTheChannelAndCarriesTheNewestVersion) {
  PublishSchedule s;
  EXPECT_EQ(s.take(true, 3), -1);  // nothing due
  s.due();                         // due at update 4...
  EXPECT_EQ(s.take(false, 4), -1);  // ...but the last broadcast is still in flight: not now
  EXPECT_EQ(s.take(false, 6), -1);
  // As soon as it completes, the parameters as they are go out, labelled with their own version
  // (7), not the version at which the publish fell due (4).
  EXPECT_EQ(s.take(true, 7), 7);
  EXPECT_EQ(s.take(true, 8), -1);  // nothing due any more
  EXPECT_EQ(s.published(), 1);
  EXPECT_EQ(s.last_version(), 7);
}

TEST(PublishSchedule, TimesEachBroadcastFromItsStartToTheFirstIdleChannel) {
  PublishSchedule s;
  s.due();
  EXPECT_EQ(s.take(true, 4, 1.0), 4);   // starts at t = 1
  EXPECT_EQ(s.take(false, 5, 1.5), -1);  // in flight
  EXPECT_EQ(s.completed(), 0);
  EXPECT_EQ(s.take(true, 6, 3.0), -1);  // seen complete at t = 3 (nothing due): 2 s
  EXPECT_EQ(s.completed(), 1);
  EXPECT_DOUBLE_EQ(s.mean_seconds(), 2.0);
  s.due();
  EXPECT_EQ(s.take(true, 7, 3.5), 7);
  EXPECT_EQ(s.take(true, 8, 3.75), -1);  // 0.25 s
  EXPECT_EQ(s.take(true, 9, 10.0), -1);  // idle and nothing in flight: no third broadcast counted
  EXPECT_EQ(s.completed(), 2);
  EXPECT_DOUBLE_EQ(s.mean_seconds(), 1.125);
  EXPECT_DOUBLE_EQ(s.max_seconds(), 2.0);
  EXPECT_EQ(s.published(), 2);
  s.due();
  EXPECT_EQ(s.take(true, 10, 11.0), 10);
  s.untime_in_flight();                  // waited for elsewhere (the first broadcast): not timed
  EXPECT_EQ(s.take(true, 11, 50.0), -1);
  EXPECT_EQ(s.completed(), 2);
  EXPECT_DOUBLE_EQ(s.max_seconds(), 2.0);
}

TEST(GpuPick, ByIndexAmongTheNodesLearnersNotByLocalRank) {
  // Two learners on a node with two GPUs: one each, whatever their world or local ranks.
  auto a = pick_gpu("auto", 0, 2, 2, 0, "n1"), b = pick_gpu("auto", 1, 2, 2, 5, "n1");
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(b.device, 1);
  EXPECT_FALSE(a.shared || b.shared);
  EXPECT_TRUE(a.note.empty());
  // One learner per node (4 GPUs each): always cuda:0, never its world rank modulo the count.
  EXPECT_EQ(pick_gpu("auto", 0, 1, 4, 3, "n2").device, 0);
  // Three learners, two GPUs: round-robin, and reported naming the host and the device.
  auto c = pick_gpu("auto", 2, 3, 2, 7, "gpu-node-9");
  EXPECT_EQ(c.device, 0);
  EXPECT_TRUE(c.shared);
  EXPECT_NE(c.note.find("gpu-node-9"), std::string::npos) << c.note;
  EXPECT_NE(c.note.find("cuda:0"), std::string::npos) << c.note;
  // No GPU: CPU for "auto", an error naming rank and host for "cuda"; "cpu" ignores GPUs.
  EXPECT_EQ(pick_gpu("auto", 0, 1, 0, 0, "n3").device, -1);
  EXPECT_EQ(pick_gpu("cpu", 0, 1, 8, 0, "n3").device, -1);
  try {
    pick_gpu("cuda", 0, 1, 0, 4, "cpu-node-2");
    FAIL() << "expected an error";
  } catch (const mpirl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 4 @ cpu-node-2"), std::string::npos) << e.what();
  }
}

TEST(GpuPick, WithoutCudaKernelsAVisibleGpuIsNotUsed) {
  // A CUDA torch on a GPU host, but mpirl built without nvcc: "auto" trains on the CPU and says
  // why (the scan cores and the graph step would throw "built without CUDA" at the first update).
  auto p = pick_gpu("auto", 0, 1, 2, 3, "gpu-node-1", /*kernels=*/false);
  EXPECT_EQ(p.device, -1);
  EXPECT_NE(p.note.find("built without its CUDA kernels"), std::string::npos) << p.note;
  EXPECT_NE(p.note.find("rank 3 @ gpu-node-1"), std::string::npos) << p.note;
  EXPECT_EQ(pick_gpu("auto", 0, 1, 2, 3, "gpu-node-1", true).device, 0);  // the control: with kernels, cuda:0
  try {
    pick_gpu("cuda", 0, 1, 2, 3, "gpu-node-1", false);
    FAIL() << "expected an error";
  } catch (const mpirl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("learner.device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("without its CUDA kernels"), std::string::npos) << e.what();
  }
}

TEST(GpuPick, SharedIsDecidedByDeviceUuidNotByIndex) {
  // Per-task binding: two learners on n1 each see one GPU as cuda:0, but different GPUs.
  const std::vector<std::string> hosts = {"n1", "n1", "n2"};
  auto p = pick_gpu("auto", 1, 2, 1, 1, "n1");  // visible = 1: the counts alone say "shared"
  EXPECT_EQ(p.device, 0);
  EXPECT_TRUE(p.shared);
  EXPECT_FALSE(shares_device(0, hosts, {"GPU-aa", "GPU-bb", "GPU-cc"}));
  EXPECT_FALSE(shares_device(1, hosts, {"GPU-aa", "GPU-bb", "GPU-cc"}));
  // The same physical GPU behind both: shared, for both of them.
  EXPECT_TRUE(shares_device(0, hosts, {"GPU-aa", "GPU-aa", "GPU-cc"}));
  EXPECT_TRUE(shares_device(1, hosts, {"GPU-aa", "GPU-aa", "GPU-cc"}));
  EXPECT_FALSE(shares_device(2, hosts, {"GPU-aa", "GPU-aa", "GPU-cc"}));
  // Equal UUIDs on different hosts are not one device; CPU learners ("") never share.
  EXPECT_FALSE(shares_device(1, {"n1", "n2", "n3"}, {"GPU-aa", "GPU-aa", "GPU-aa"}));
  EXPECT_FALSE(shares_device(0, hosts, {"", "", "GPU-cc"}));
}

TEST(Losses, MaskedSequencesLeaveTheLossAsIfTheyWereNeverInTheBatch) {
  // Sequences masked out (too old) must give the loss of the batch without them, for IMPALA and
  // APPO, with and without importance weights: each column's V-trace is independent.
  torch::manual_seed(7);
  envs::EnvSpec spec;
  spec.obs_shape = {3};
  spec.discrete = true;
  spec.num_actions = 4;
  const int64_t T = 5, B = 4;
  auto b = batch(T, B, 3);
  b.actions = torch::randint(0, 4, {T, B}, torch::kInt64);
  b.rewards = torch::randn({T, B});
  b.terminated[2][1] = 1;
  b.behaviour_logp = -torch::rand({T, B}) - 0.5;
  b.trunc_value = torch::zeros({T, B});
  models::PolicyOutput out{torch::randn({T + 1, B, 4}), torch::randn({T + 1, B})};
  auto kept = torch::tensor({0, 2, 3}, torch::kInt64);
  auto cols = [&](const torch::Tensor& t) { return t.index_select(1, kept); };
  for (bool weighted : {false, true}) {
    TrainBatch m = b, k = b;
    m.keep = torch::tensor({1.f, 0.f, 1.f, 1.f});
    if (weighted) m.weights = torch::tensor({0.5f, 9.f, 1.f, 0.25f});
    k.obs = cols(b.obs), k.is_init = cols(b.is_init), k.actions = cols(b.actions), k.rewards = cols(b.rewards);
    k.terminated = cols(b.terminated), k.truncated = cols(b.truncated), k.behaviour_logp = cols(b.behaviour_logp);
    k.trunc_value = cols(b.trunc_value);
    if (weighted) k.weights = torch::tensor({0.5f, 1.f, 0.25f});
    models::PolicyOutput ko{cols(out.dist), cols(out.value)};
    LossOptions o;
    for (auto* fn : {&impala_loss, &appo_loss}) {
      auto lm = (*fn)(spec, m, out, o), lk = (*fn)(spec, k, ko, o);
      EXPECT_NEAR(lm.policy.item<double>(), lk.policy.item<double>(), 1e-5) << weighted;
      EXPECT_NEAR(lm.value.item<double>(), lk.value.item<double>(), 1e-5) << weighted;
      EXPECT_NEAR(lm.entropy.item<double>(), lk.entropy.item<double>(), 1e-5) << weighted;
    }
  }
  // A minibatch slice (as APPO takes them) of columns 0..1, where column 1 is masked, is the loss
  // of column 0 alone -- the mask travels with the slice, not a whole-batch rescaling.
  {
    TrainBatch m = b;
    m.keep = torch::tensor({1.f, 0.f, 1.f, 1.f});
    auto one = torch::tensor({0}, torch::kInt64);
    auto col0 = [&](const torch::Tensor& t) { return t.index_select(1, one); };
    TrainBatch k = b;
    k.obs = col0(b.obs), k.is_init = col0(b.is_init), k.actions = col0(b.actions), k.rewards = col0(b.rewards);
    k.terminated = col0(b.terminated), k.truncated = col0(b.truncated), k.behaviour_logp = col0(b.behaviour_logp);
    k.trunc_value = col0(b.trunc_value);
    auto sub = m.slice_batch(0, 2);
    models::PolicyOutput so{out.dist.slice(1, 0, 2), out.value.slice(1, 0, 2)}, ko{col0(out.dist), col0(out.value)};
    auto ls = appo_loss(spec, sub, so, LossOptions{}), lk = appo_loss(spec, k, ko, LossOptions{});
    EXPECT_NEAR(ls.total.item<double>(), lk.total.item<double>(), 1e-5);
  }
  // Everything masked: zero loss terms, no division by zero.
  TrainBatch none = b;
  none.keep = torch::zeros({B});
  auto l = impala_loss(spec, none, out, LossOptions{});
  EXPECT_EQ(l.total.item<double>(), 0.0);
}
