#pragma once
// Fault injection for the tests of the abort path (a rank that throws mid-run must end the whole
// job). MPIRL_TEST_FAULT="RANK:SECONDS" makes fault_point() on world rank RANK throw mpirl::Error
// once SECONDS have passed since its first call. Unset (always, outside tests): one branch.
namespace mpirl {

void fault_point();

// MPIRL_TEST_UPDATE_DELAY_MS=N: every learner sleeps N ms after each update, so a test can make
// the learner the bottleneck by a known amount whatever the machine's speed. Unset: one branch.
void test_update_delay();

}  // namespace mpirl
