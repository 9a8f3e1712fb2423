// Which gradient reducer learners take (learner/gradient_reducer.h): NCCL only when every learner
// owns a GPU and the build has NCCL; MPI over host memory otherwise, with the reason stated. The
// NCCL reducer itself runs in tests/gpu/test_nccl.cpp (ctest -L gpu, on a GPU machine).
#include <gtest/gtest.h>

#include "learner/reducer_choice.h"
#include "learner/nccl_reducer.h"

using namespace mpirl::learner;

TEST(ReducerChoice, NcclOnlyWithOneGpuPerLearnerAndNcclBuilt) {
  EXPECT_EQ(choose_reducer(1, true, false, true).kind, ReducerKind::None);
  EXPECT_EQ(choose_reducer(1, false, false, true).kind, ReducerKind::None);
  EXPECT_EQ(choose_reducer(2, false, false, true).kind, ReducerKind::Nccl);
  const auto cpu = choose_reducer(2, true, false, true);
  EXPECT_EQ(cpu.kind, ReducerKind::Mpi);
  EXPECT_NE(cpu.why.find("CPU"), std::string::npos) << cpu.why;
  const auto shared = choose_reducer(4, false, true, true);
  EXPECT_EQ(shared.kind, ReducerKind::Mpi);
  EXPECT_NE(shared.why.find("share a GPU"), std::string::npos) << shared.why;
  const auto unbuilt = choose_reducer(2, false, false, false);
  EXPECT_EQ(unbuilt.kind, ReducerKind::Mpi);
  EXPECT_NE(unbuilt.why.find("no NCCL"), std::string::npos) << unbuilt.why;
  // one learner on CPU among GPU learners makes all of them take MPI (the choice is collective)
  EXPECT_EQ(choose_reducer(3, true, false, true).kind, ReducerKind::Mpi);
}

TEST(ReducerChoice, NcclReducerRefusesACpuDevice) {
  ReducerRequest req;  // CPU
  req.host = "here";
  EXPECT_THROW(make_nccl_reducer(MPI_COMM_SELF, 1, req), std::exception);
}
