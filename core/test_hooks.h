#pragma once
// Test hooks: environment variables (MPIRL_TEST_*, MPIRL_FAKE_GPUS) through which tests inject
// faults, delays and fakes. Every hook is read through test_hook(), which logs a warning the first
// time a set hook is read on this rank ("test hook MPIRL_TEST_FAULT=3:2 is set on rank 3 @ host:
// for tests only"), so that a hook left set in a real job never acts unannounced; learner 0 lists
// the hooks set in its environment in summary.json (`test_hooks`).
#include <string>
#include <vector>

namespace mpirl {

// The value of test hook `name` (nullptr when unset). Announces it on first read.
const char* test_hook(const char* name);
// "NAME=value" of every MPIRL_TEST_* and MPIRL_FAKE_* variable in this process's environment.
std::vector<std::string> test_hooks_set();

}  // namespace mpirl
