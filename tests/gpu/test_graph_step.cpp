// The learner step as a CUDA graph (learner/graph_step.h) against the eager step on the same GPU:
// the same parameters within 1e-5 after 50 updates from the same batches (IMPALA and APPO, with
// and without the LRU scan core), with the gradient average captured in the graph (no reducer; a
// one-rank NCCL communicator) or between two graphs (MPI over host memory).
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <sstream>

#include "core/config.h"
#include "envs/registry.h"
#include "learner/nccl_reducer.h"
#include "learner/trainer.h"
#include "tests/common/train_batches.h"

using namespace mpirl;
using namespace mpirl::learner;
using mpirl::testing::max_abs_diff;
using mpirl::testing::params_of;
using mpirl::testing::random_batch;

namespace {

const torch::Device kGpu(torch::kCUDA, 0);

void init_mpi() {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) MPI_Init(nullptr, nullptr);  // singleton MPI: MPI_COMM_SELF is enough here
}

// 50 updates on an eager and a graph trainer (each with its own reducer); returns the largest
// parameter difference, and checks the losses and priorities along the way.
double run_pair(const char* algo, const char* core, GradientReducer& eager_reducer, GradientReducer& graph_reducer,
                int expect_graphs) {
  Config cfg = load_config("", {std::string("learner.algo=\"") + algo + "\"", std::string("model.core=\"") + core + "\"",
                                "model.core_state=16", "model.core_size=32", "learner.appo_minibatches=2",
                                "learner.appo_epochs=2", "learner.lr=0.003"});
  auto spec = envs::env_spec(cfg);
  const int64_t T = 32, B = 16, D = spec.obs_size(), A = spec.num_actions, S = models::state_size(cfg, spec);
  torch::manual_seed(1);
  Trainer eager(cfg, spec, kGpu, eager_reducer, StepMode::Eager);
  torch::manual_seed(1);
  Trainer graph(cfg, spec, kGpu, graph_reducer, StepMode::Auto);  // learner.cuda_graph defaults to true
  EXPECT_EQ(graph.mode(), StepMode::Graph);
  const auto start = params_of(eager);
  for (uint64_t k = 0; k < 50; ++k) {
    auto b1 = random_batch(T, B, D, A, S, 100 + k, k % 2 == 1, kGpu);
    auto b2 = random_batch(T, B, D, A, S, 100 + k, k % 2 == 1, kGpu);
    auto r1 = eager.update(b1, {});
    auto r2 = graph.update(b2, {});
    EXPECT_LT((r1.priorities - r2.priorities).abs().max().item<double>(), 1e-4) << "update " << k;
    EXPECT_NEAR(r1.last.total.item<double>(), r2.last.total.item<double>(), 1e-4) << "update " << k;
  }
  EXPECT_EQ(graph.graphs(), expect_graphs);
  EXPECT_GT(max_abs_diff(params_of(eager), start), 1e-2);  // the updates did move the parameters
  return max_abs_diff(params_of(eager), params_of(graph));
}

}  // namespace

TEST(GraphStep, EqualsEagerAfter50Updates) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no CUDA device visible: run the GPU tests on a GPU machine";
  for (const char* algo : {"impala", "appo"})
    for (const char* core : {"none", "lru"}) {
      SCOPED_TRACE(std::string(algo) + " " + core);
      NoReducer a, b;
      EXPECT_LT(run_pair(algo, core, a, b, 1), 1e-5);
    }
}

TEST(GraphStep, OneRankNcclAllReduceInsideTheGraph) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no CUDA device visible";
  ASSERT_TRUE(nccl_available()) << "built without NCCL";
  init_mpi();
  ReducerRequest req;
  req.device = kGpu;
  req.host = "gpu-test";
  req.timeout_s = 60;
  auto nccl = make_nccl_reducer(MPI_COMM_SELF, 1, req);
  ASSERT_TRUE(nccl->capturable());
  NoReducer none;  // the average over one rank is the identity
  EXPECT_LT(run_pair("appo", "lru", none, *nccl, 1), 1e-5);
}

TEST(GraphStep, TwoGraphsAroundTheHostAllReduce) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no CUDA device visible";
  init_mpi();
  MpiReducer host(MPI_COMM_SELF, 1), host_eager(MPI_COMM_SELF, 1);
  ASSERT_FALSE(host.capturable());
  EXPECT_LT(run_pair("impala", "lru", host_eager, host, 2), 1e-5);
}

TEST(GraphStep, CheckpointLoadIsCapturedAgain) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no CUDA device visible";
  Config cfg = load_config("", {"model.core=\"lru\"", "model.core_state=8", "model.core_size=16"});
  auto spec = envs::env_spec(cfg);
  const int64_t T = 8, B = 8, D = spec.obs_size(), A = spec.num_actions, S = models::state_size(cfg, spec);
  NoReducer n1, n2;
  torch::manual_seed(3);
  Trainer a(cfg, spec, kGpu, n1);
  for (uint64_t k = 0; k < 3; ++k) {
    auto b = random_batch(T, B, D, A, S, k, false, kGpu);
    a.update(b, {});
  }
  torch::serialize::OutputArchive out;
  a.save(out);
  std::ostringstream os;
  out.save_to(os);
  torch::manual_seed(4);
  Trainer b(cfg, spec, kGpu, n2);
  auto first = random_batch(T, B, D, A, S, 50, false, kGpu);
  b.update(first, {});  // captured against its own (different) state
  std::istringstream is(os.str());
  torch::serialize::InputArchive in;
  in.load_from(is);
  b.load(in);
  auto x1 = random_batch(T, B, D, A, S, 60, false, kGpu), x2 = random_batch(T, B, D, A, S, 60, false, kGpu);
  a.update(x1, {});
  b.update(x2, {});
  EXPECT_LT(max_abs_diff(params_of(a), params_of(b)), 1e-6);
}
