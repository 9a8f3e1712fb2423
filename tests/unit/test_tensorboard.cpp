// TensorBoard event files (tracking/): the TFRecord framing against hand-computed bytes, and what
// the writer puts in each Event, read back record by record and parsed with the same schema.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "core/error.h"
#include "tracking/proto/tensorboard.pb.h"
#include "tracking/record_io.h"
#include "tracking/tensorboard.h"

namespace fs = std::filesystem;
using namespace mpirl::tracking;

namespace {

std::string temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / fmt::format("mpirl-tb-{}-{}", name, ::getpid());
  fs::remove_all(d);
  return d.string();
}

std::vector<mpirl::tb::Event> read_events(const std::string& path) {
  std::vector<mpirl::tb::Event> events;
  for (const auto& r : read_records(path)) {
    mpirl::tb::Event e;
    EXPECT_TRUE(e.ParseFromString(r));
    events.push_back(e);
  }
  return events;
}

}  // namespace

TEST(TensorBoard, Crc32cKnownValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);    // RFC 3720, B.4: 32 bytes of zeros
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);  // RFC 3720, B.4: 32 bytes of ones
  // Masking: rotate right by 15 (0xE3069283 -> 0x2507C60D), add 0xA282EAD8.
  EXPECT_EQ(mask_crc(0xE3069283u), 0xC78AB0E5u);
  EXPECT_EQ(masked_crc32c("123456789"), 0xC78AB0E5u);
}

TEST(TensorBoard, FramesARecord) {
  // "abc": length 3 as 8 little-endian bytes, masked CRC-32C of those bytes (0x0E4999B0), the
  // data, masked CRC-32C of the data (0x21F1576E), each CRC little-endian.
  const std::string want("\x03\0\0\0\0\0\0\0\xb0\x99\x49\x0e"
                         "abc\x6e\x57\xf1\x21",
                         19);
  EXPECT_EQ(frame_record("abc"), want);
  EXPECT_EQ(frame_record("").size(), 16u);
}

TEST(TensorBoard, ReadsRecordsBackAndRejectsDamage) {
  const std::string dir = temp_dir("records");
  fs::create_directories(dir);
  const std::string path = dir + "/r";
  {
    std::ofstream out(path, std::ios::binary);
    out << frame_record("first") << frame_record(std::string(1000, 'x')) << frame_record("");
  }
  const auto recs = read_records(path);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0], "first");
  EXPECT_EQ(recs[1], std::string(1000, 'x'));
  EXPECT_EQ(recs[2], "");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(12 + 2);  // a byte of the first record's data
    f.put('X');
  }
  EXPECT_THROW(read_records(path), mpirl::Error);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << frame_record("whole") << frame_record("cut short").substr(0, 15);
  }
  EXPECT_THROW(read_records(path), mpirl::Error);
  fs::remove_all(dir);
}

TEST(TensorBoard, WriterEventsReadBack) {
  const std::string dir = temp_dir("writer");
  std::string path;
  {
    TensorBoardWriter w(dir + "/tb");
    path = w.path();
    const nlohmann::json row = {{"env_steps", 4096},   {"sps", 1234.5},          {"mean_return", nullptr},
                                {"name", "run"},       {"final", true},          {"list", {1, 2}},
                                {"eval", {{"mean_return", -0.25}}}};
    EXPECT_EQ(w.write_scalars(row, 4096, "train/"), 3);
    EXPECT_EQ(w.write_scalars({{"only", "text"}}, 5000), 0);  // nothing numeric: no event
    w.write_text("config", "```toml\n[run]\n```", 0);
    w.write_histogram("train/episode_return", {0.0, 1.0, 1.0, 2.5, 10.0}, 4096, 4);
    w.write_histogram("train/constant", {7.0, 7.0}, 4096);
    w.write_histogram("train/none", {}, 4096);
  }
  EXPECT_TRUE(std::regex_match(fs::path(path).filename().string(),
                               std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.\d+\.\d+)")))
      << path;
  const auto ev = read_events(path);
  ASSERT_EQ(ev.size(), 5u);  // file_version, scalars, text, two histograms
  EXPECT_EQ(ev[0].file_version(), "brain.Event:2");
  EXPECT_GT(ev[0].wall_time(), 1.6e9);

  ASSERT_TRUE(ev[1].has_summary());
  EXPECT_EQ(ev[1].step(), 4096);
  std::map<std::string, float> scalars;
  for (const auto& v : ev[1].summary().value()) {
    EXPECT_EQ(v.value_case(), mpirl::tb::Summary::Value::kSimpleValue);
    scalars[v.tag()] = v.simple_value();
  }
  EXPECT_EQ(scalars, (std::map<std::string, float>{
                         {"train/env_steps", 4096.f}, {"train/sps", 1234.5f}, {"train/eval/mean_return", -0.25f}}));

  const auto& text = ev[2].summary().value(0);
  EXPECT_EQ(text.tag(), "config");
  EXPECT_EQ(text.metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(int(text.tensor().dtype()), 7);  // DT_STRING
  EXPECT_TRUE(text.tensor().has_tensor_shape());
  EXPECT_EQ(text.tensor().tensor_shape().dim_size(), 0);  // rank 0
  ASSERT_EQ(text.tensor().string_val_size(), 1);
  EXPECT_EQ(text.tensor().string_val(0), "```toml\n[run]\n```");

  const auto& h = ev[3].summary().value(0).histo();
  EXPECT_EQ(ev[3].summary().value(0).tag(), "train/episode_return");
  EXPECT_EQ(h.min(), 0.0);
  EXPECT_EQ(h.max(), 10.0);
  EXPECT_EQ(h.num(), 5.0);
  EXPECT_EQ(h.sum(), 14.5);
  EXPECT_EQ(h.sum_squares(), 0 + 1 + 1 + 6.25 + 100);
  // Limits 2.5, 5, 7.5, 10; bucket i holds (limit[i-1], limit[i]]: 2.5 falls in the first.
  EXPECT_EQ(std::vector<double>(h.bucket_limit().begin(), h.bucket_limit().end()),
            (std::vector<double>{2.5, 5.0, 7.5, 10.0}));
  EXPECT_EQ(std::vector<double>(h.bucket().begin(), h.bucket().end()), (std::vector<double>{4, 0, 0, 1}));

  const auto& c = ev[4].summary().value(0).histo();
  EXPECT_EQ(c.bucket_limit_size(), 1);
  EXPECT_EQ(c.bucket(0), 2.0);
  fs::remove_all(dir);
}

TEST(TensorBoard, SessionStartEvent) {
  // What a resumed run writes: a SessionLog START at the step from which TensorBoard's readers
  // drop the points of earlier files (purge_orphaned_data).
  const std::string dir = temp_dir("start");
  std::string path;
  {
    TensorBoardWriter w(dir);
    path = w.path();
    w.write_session_start(12345);
  }
  const auto ev = read_events(path);
  ASSERT_EQ(ev.size(), 2u);  // file_version, START
  ASSERT_TRUE(ev[1].has_session_log());
  EXPECT_FALSE(ev[1].has_summary());
  EXPECT_EQ(ev[1].session_log().status(), mpirl::tb::SessionLog::START);
  EXPECT_EQ(ev[1].step(), 12345);
  EXPECT_GT(ev[1].wall_time(), 1.6e9);
  // TensorBoard's field numbers on the wire, independent of our schema: Event.session_log = 7
  // (length-delimited: tag 0x3a, 2 bytes) holding SessionLog.status = 1 (varint: tag 0x08) = START (1),
  // after wall_time (1) and step (2) since fields are serialized in number order.
  const std::string raw = read_records(path)[1];
  EXPECT_TRUE(raw.ends_with(std::string("\x3a\x02\x08\x01", 4)));
  fs::remove_all(dir);
}

TEST(TensorBoard, EachWriterHasItsOwnFile) {
  const std::string dir = temp_dir("two");
  TensorBoardWriter a(dir), b(dir);
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(read_records(a.path()).size(), 1u);
  fs::remove_all(dir);
}

TEST(TensorBoard, UnwritableDirectoryIsAnError) {
  const std::string dir = temp_dir("file");
  std::ofstream(dir) << "a file, not a directory";
  EXPECT_THROW(TensorBoardWriter w(dir + "/tb"), mpirl::Error);
  fs::remove(dir);
}
