#pragma once
// Fault injection for the tests of the abort path (a rank that throws mid-run must end the whole
// job). MPIRL_TEST_FAULT="RANK:SECONDS" makes fault_point() on world rank RANK throw mpirl::Error
// once SECONDS have passed since its first call. Unset (always, outside tests): one branch.
namespace mpirl {

void fault_point();

// MPIRL_TEST_UPDATE_DELAY_MS=N: every learner sleeps N ms after each update, so a test can make
// the learner the bottleneck by a known amount whatever the machine's speed. Unset: one branch.
void test_update_delay();

// MPIRL_TEST_START_DELAY_MS=N: learner 0 sleeps N ms before it publishes the first parameters (a
// slow start: a long self-check or model load), so that a test can make start-up take a known
// time. Unset: one branch.
void test_start_delay();

// MPIRL_TEST_KILL_AT="WHERE:N": the N-th time this process reaches kill_point(WHERE) it raises
// SIGKILL (no handler, no unwinding: as the OOM killer or a lost node would stop it). The points:
// "seal" (learner 0, every file of a checkpoint written, COMPLETE not yet) and "replay_part" (the
// replay, replay.h5 of its checkpoint part written, replay_state.json not yet). Unset: one branch.
void kill_point(const char* where);

}  // namespace mpirl
