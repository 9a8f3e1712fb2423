#include "app/video.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl {
namespace {

struct Canvas {
  envs::Frame& f;
  void clear(int h, int w) {
    f.h = h, f.w = w;
    f.rgb.assign(size_t(h) * size_t(w) * 3, 255);
  }
  void put(int y, int x, const uint8_t* c) {
    if (y < 0 || x < 0 || y >= f.h || x >= f.w) return;
    std::memcpy(&f.rgb[(size_t(y) * size_t(f.w) + size_t(x)) * 3], c, 3);
  }
  void rect(double x0, double y0, double x1, double y1, const uint8_t* c) {
    for (int y = int(std::floor(y0)); y <= int(std::ceil(y1)); ++y)
      for (int x = int(std::floor(x0)); x <= int(std::ceil(x1)); ++x) put(y, x, c);
  }
  // A segment of width `wd` (distance to the segment at most wd / 2).
  void line(double x0, double y0, double x1, double y1, double wd, const uint8_t* c) {
    const double dx = x1 - x0, dy = y1 - y0, l2 = std::max(dx * dx + dy * dy, 1e-9);
    for (int y = int(std::min(y0, y1) - wd); y <= int(std::max(y0, y1) + wd); ++y)
      for (int x = int(std::min(x0, x1) - wd); x <= int(std::max(x0, x1) + wd); ++x) {
        const double t = std::clamp(((x - x0) * dx + (y - y0) * dy) / l2, 0.0, 1.0);
        const double ex = x - (x0 + t * dx), ey = y - (y0 + t * dy);
        if (ex * ex + ey * ey <= wd * wd / 4) put(y, x, c);
      }
  }
  void disc(double cx, double cy, double r, const uint8_t* c) { line(cx, cy, cx, cy, 2 * r, c); }
};

const uint8_t kBlack[3] = {0, 0, 0}, kCart[3] = {0, 0, 0}, kPole[3] = {202, 152, 101}, kAxle[3] = {129, 132, 203},
              kRod[3] = {204, 77, 77};

// Gymnasium's CartPole-v1 picture: 600x400, 4.8 m of track across the width.
void cartpole(Canvas& c, const float* s) {
  c.clear(400, 600);
  const double scale = 600 / 4.8, cx = s[0] * scale + 300, track = 300;
  c.line(0, track, 600, track, 1, kBlack);
  c.rect(cx - 25, track - 15, cx + 25, track + 15, kCart);
  const double ax = cx, ay = track - 15 + 4, len = scale * 1.0;  // pole length 2 * 0.5 m
  c.line(ax, ay, ax + len * std::sin(s[2]), ay - len * std::cos(s[2]), 10, kPole);
  c.disc(ax, ay, 5, kAxle);
}

// Pendulum-v1 (observation cos, sin, angular velocity; 0 = upright): 500x500.
void pendulum(Canvas& c, const float* s) {
  c.clear(500, 500);
  c.line(250, 250, 250 + 200 * s[1], 250 - 200 * s[0], 40, kRod);
  c.disc(250, 250, 8, kBlack);
}

// uint8 images [C, H, W] scaled up (nearest) to at least 256 pixels: 3 channels as RGB, MinAtar's
// object layers each in its own colour, anything else as the grey of its last channel (the
// newest frame of a stack).
void image(Canvas& c, const envs::EnvSpec& spec, const uint8_t* px) {
  const auto& sh = spec.obs_shape;
  const int C = sh.size() == 3 ? int(sh[0]) : 1, H = int(sh[sh.size() - 2]), W = int(sh.back());
  const int k = std::max(1, (256 + std::max(H, W) - 1) / std::max(H, W));
  c.clear(H * k, W * k);
  const bool minatar = spec.id.rfind("minatar:", 0) == 0;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      uint8_t rgb[3];
      auto at = [&](int ch) { return px[(size_t(ch) * H + size_t(y)) * W + size_t(x)]; };
      if (C == 3) {
        for (int i = 0; i < 3; ++i) rgb[i] = at(i);
      } else if (minatar) {
        rgb[0] = rgb[1] = rgb[2] = 0;
        for (int ch = 0; ch < C; ++ch)
          if (at(ch)) {  // a colour per layer, spread around the hue circle
            const double h = 6.0 * ch / C;
            for (int i = 0; i < 3; ++i)
              rgb[i] = uint8_t(255 * std::clamp(std::fabs(std::fmod(h + 4 - 2 * i + 6, 6.0) - 3) - 1, 0.0, 1.0));
          }
      } else {
        rgb[0] = rgb[1] = rgb[2] = at(C - 1);
      }
      c.rect(x * k, y * k, x * k + k - 1, y * k + k - 1, rgb);
    }
}

// 'path' for sh, whatever it holds.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

bool draw_observation(const envs::EnvSpec& spec, const void* obs, envs::Frame& f) {
  Canvas c{f};
  if (spec.obs_uint8 && (spec.obs_shape.size() == 3 || spec.obs_shape.size() == 2)) {
    image(c, spec, static_cast<const uint8_t*>(obs));
    return true;
  }
  if (spec.id == "CartPole-v1" && spec.obs_size() == 4) return cartpole(c, static_cast<const float*>(obs)), true;
  if (spec.id == "Pendulum-v1" && spec.obs_size() == 3) return pendulum(c, static_cast<const float*>(obs)), true;
  return false;
}

VideoWriter::VideoWriter(const std::string& path, int fps) : path_(path), fps_(fps) {
  if (std::system("command -v ffmpeg >/dev/null 2>&1") != 0)
    throw Error("--video needs ffmpeg on PATH (Debian: apt-get install ffmpeg; scripts/setup.sh installs it)");
}

VideoWriter::~VideoWriter() {
  if (pipe_) ::pclose(pipe_);
}

void VideoWriter::add(const envs::Frame& f) {
  if (!pipe_) {
    h_ = f.h, w_ = f.w;
    // Even sizes for yuv420p (what players expect), padded with white.
    const std::string cmd = fmt::format(
        "ffmpeg -nostdin -y -loglevel error -f rawvideo -pix_fmt rgb24 -s {}x{} -r {} -i - -vf "
        "'pad=ceil(iw/2)*2:ceil(ih/2)*2:color=white' -c:v libx264 -pix_fmt yuv420p -movflags +faststart {}",
        w_, h_, fps_, shell_quote(path_));
    pipe_ = ::popen(cmd.c_str(), "w");
    if (!pipe_) throw Error(fmt::format("cannot start ffmpeg for '{}'", path_));
  }
  if (f.h != h_ || f.w != w_)
    throw Error(fmt::format("video '{}': a frame of {}x{} after frames of {}x{}", path_, f.w, f.h, w_, h_));
  if (std::fwrite(f.rgb.data(), 1, f.rgb.size(), pipe_) != f.rgb.size())
    throw Error(fmt::format("video '{}': ffmpeg stopped reading frames", path_));
  ++frames_;
}

int64_t VideoWriter::close() {
  if (!pipe_) throw Error(fmt::format("video '{}': no frame to write", path_));
  const int st = ::pclose(pipe_);
  pipe_ = nullptr;
  if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    throw Error(fmt::format("video '{}': ffmpeg failed (status {})", path_, st));
  return frames_;
}

}  // namespace mpirl
