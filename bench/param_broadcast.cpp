// Polls per parameter broadcast: learner 0 (rank 0) publishes through comm/param_channel.h and
// every rank tests the broadcast once per simulated env step (a sleep), as the actors and the
// learner do. Prints, for each MPI_Test count per poll, the most polls any rank needed per
// broadcast and the slowest rank's mean wall time per broadcast. Fragmenting transports need many
// MPI calls per broadcast; compare
//   mpirun -n 16 --oversubscribe build/bench_param_broadcast
//   mpirun -n 16 --oversubscribe --mca btl_vader_single_copy_mechanism none build/bench_param_broadcast
// Flags: --params N (floats; default 1686695, the Atari Nature CNN), --step-us S (default 1000),
// --reps R (default 3), --tests K1,K2,... (default 1 and 0 = auto).
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/param_channel.h"

namespace {

struct Args {
  long params = 1686695;
  int step_us = 1000, reps = 3;
  std::vector<int> tests = {1, 0};
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 == argc) {
      std::fprintf(stderr, "flag %s needs a value\n", argv[i]);
      std::exit(2);
    }
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--params") a.params = std::atol(v.c_str());
    else if (k == "--step-us") a.step_us = std::atoi(v.c_str());
    else if (k == "--reps") a.reps = std::atoi(v.c_str());
    else if (k == "--tests") {
      a.tests.clear();
      for (size_t p = 0; p <= v.size();) {
        size_t q = v.find(',', p);
        if (q == std::string::npos) q = v.size();
        a.tests.push_back(std::atoi(v.substr(p, q - p).c_str()));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.reps < 1 || a.params < 1 || a.step_us < 0) {
    std::fprintf(stderr, "--reps and --params must be at least 1, --step-us at least 0\n");
    std::exit(2);
  }
  return a;
}

// One channel with `tests` MPI_Test calls per poll; returns this rank's most polls per broadcast.
long measure(const Args& a, int tests, int rank, double* seconds, int* used) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  std::vector<float> params(size_t(a.params), 1.0f);
  long worst = 0;
  double total = 0;
  {
    mpirl::ParamChannel ch(comm, a.params, tests);
    *used = ch.tests_per_poll();
    if (rank != 0) ch.post();
    for (int r = 0; r < a.reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      long polls = 1;
      int64_t v = -1;
      if (rank == 0) {
        ch.publish(params.data(), r);
        while (!ch.idle()) { usleep(unsigned(a.step_us)); ++polls; }
      } else {
        while (ch.poll(params.data(), &v) != mpirl::ParamChannel::Got::Params) { usleep(unsigned(a.step_us)); ++polls; }
      }
      total += MPI_Wtime() - t0;
      worst = polls > worst ? polls : worst;
    }
    if (rank == 0) {
      ch.publish_stop();
    } else {
      int64_t v = -1;
      while (ch.poll(params.data(), &v) != mpirl::ParamChannel::Got::Stop) usleep(unsigned(a.step_us));
    }
  }
  MPI_Comm_free(&comm);
  *seconds = total / a.reps;
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Args a = parse(argc, argv);
  if (rank == 0)
    std::printf("param_broadcast: %d ranks, %ld floats (%.1f MB), one poll per %d us, %d broadcasts each\n", size,
                a.params, double(a.params) * 4e-6, a.step_us, a.reps);
  for (int k : a.tests) {
    double s = 0, smax = 0;
    int used = 0;
    long worst = measure(a, k, rank, &s, &used), all = 0;
    MPI_Reduce(&worst, &all, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&s, &smax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("{\"tests_per_poll\": %d%s, \"max_polls_per_broadcast\": %ld, \"slowest_rank_mean_s\": %.4f}\n", used,
                  k <= 0 ? ", \"auto\": true" : "", all, smax);
  }
  MPI_Finalize();
  return 0;
}
