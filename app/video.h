#pragma once
// Videos of a policy playing (`mpirl eval RUN --video out.mp4`): frames from the env's own
// renderer where it has one (Python envs made with render_mode="rgb_array"), else drawn here from
// the observation (the built-in CartPole-v1 and Pendulum-v1, and image observations), encoded as
// H.264 MP4 by an ffmpeg process fed raw RGB frames through a pipe.
#include <cstdio>
#include <string>

#include "envs/env.h"
#include "envs/vector_env.h"

namespace mpirl {

// Draws the observation `obs` (one env's, as the spec lays it out) into `f`; false when this
// env's observations cannot be drawn.
bool draw_observation(const envs::EnvSpec& spec, const void* obs, envs::Frame& f);

class VideoWriter {
 public:
  // Throws mpirl::Error when ffmpeg is missing or cannot start.
  VideoWriter(const std::string& path, int fps);
  ~VideoWriter();
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;
  // Every frame must have the first frame's size (the first one opens the encoder).
  void add(const envs::Frame& f);
  // Ends the stream and waits for ffmpeg; throws naming ffmpeg's exit status. Returns the frames.
  int64_t close();

 private:
  std::string path_;
  int fps_;
  FILE* pipe_ = nullptr;
  int h_ = 0, w_ = 0;
  int64_t frames_ = 0;
};

}  // namespace mpirl
