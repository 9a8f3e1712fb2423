// curve.jsonl (learner/curve_log.h): a row each time the env steps pass another interval, the
// interval's episodes averaged, a forced row at the end, and a resume that drops the rows past its
// checkpoint -- against values worked out by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "learner/curve_log.h"

using mpirl::learner::CurveLog;

namespace {
std::vector<nlohmann::json> read_rows(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

std::string fresh_path(const char* name) {
  auto dir = std::filesystem::temp_directory_path() / ("mpirl_curve_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto p = dir / name;
  std::filesystem::remove(p);
  return p.string();
}
}  // namespace

TEST(CurveLog, ARowPerIntervalPassedWithTheIntervalsEpisodes) {
  const std::string path = fresh_path("curve.jsonl");
  CurveLog c(path, 10);
  c.episode(1);
  c.record(5, 0.1, 1, 1.0);  // before the first point (10): no row
  c.episode(3);
  c.record(12, 0.2, 2, 2.0);  // passed 10: a row with both episodes, mean 2
  c.record(15, 0.3, 2, 2.0);  // before 20: none
  c.episode(5);
  c.episode(7);
  c.episode(9);
  c.record(31, 0.4, 5, 5.0);  // passed 20 and 30 in one reply: one row, episodes 5, 7, 9
  c.record(32, 0.5, 5, 5.0);  // before 40: none
  c.record(32, 0.6, 5, 5.0, true);  // the end: forced, no episode since (null interval return)
  c.record(32, 0.7, 5, 5.0, true);  // again at the same steps: no second row
  c.episode(11);
  c.record(32, 0.8, 6, 6.0, true);  // an episode drained at the stop, no new step: a row for it
  const auto rows = read_rows(path);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0]["env_steps"], 12);
  EXPECT_DOUBLE_EQ(rows[0]["interval_return"].get<double>(), 2.0);
  EXPECT_EQ(rows[0]["interval_episodes"], 2);
  EXPECT_EQ(rows[1]["env_steps"], 31);
  EXPECT_DOUBLE_EQ(rows[1]["interval_return"].get<double>(), 7.0);
  EXPECT_EQ(rows[1]["interval_episodes"], 3);
  EXPECT_DOUBLE_EQ(rows[1]["mean_return"].get<double>(), 5.0);
  EXPECT_EQ(rows[2]["env_steps"], 32);
  EXPECT_TRUE(rows[2]["interval_return"].is_null());
  EXPECT_EQ(rows[2]["interval_episodes"], 0);
  EXPECT_EQ(rows[3]["env_steps"], 32);
  EXPECT_DOUBLE_EQ(rows[3]["interval_return"].get<double>(), 11.0);
  EXPECT_EQ(rows[3]["episodes"], 6);
}

TEST(CurveLog, NoWindowMeanYetIsNullAndZeroIntervalWritesNothing) {
  const std::string path = fresh_path("curve_nan.jsonl");
  CurveLog c(path, 4);
  c.record(4, 0.1, 0, std::nan(""));
  const auto rows = read_rows(path);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0]["mean_return"].is_null());
  const std::string off = fresh_path("curve_off.jsonl");
  CurveLog none(off, 0);
  none.episode(1);
  none.record(100, 1, 1, 1, true);
  EXPECT_FALSE(std::filesystem::exists(off));
}

TEST(CurveLog, AResumeDropsTheRowsPastItsCheckpointAndGoesOnFromIt) {
  const std::string path = fresh_path("curve_resume.jsonl");
  {
    CurveLog c(path, 10);
    for (int64_t s : {10, 20, 30, 40}) c.record(s, 0, 0, 0);
  }
  CurveLog c(path, 10);
  const auto dir = std::filesystem::path(path).parent_path();
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("curve_resume.after-checkpoint-", 0) == 0) std::filesystem::remove(e.path());
  c.resume(25);  // the checkpoint was at 25 env steps: rows 30 and 40 move aside
  c.record(29, 0, 0, 0);  // before 30: none
  c.record(33, 0, 0, 0);
  const auto rows = read_rows(path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["env_steps"], 10);
  EXPECT_EQ(rows[1]["env_steps"], 20);
  EXPECT_EQ(rows[2]["env_steps"], 33);
  std::vector<nlohmann::json> aside;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("curve_resume.after-checkpoint-", 0) == 0) aside = read_rows(e.path().string());
  ASSERT_EQ(aside.size(), 2u);
  EXPECT_EQ(aside[0]["env_steps"], 30);
  EXPECT_EQ(aside[1]["env_steps"], 40);
}
