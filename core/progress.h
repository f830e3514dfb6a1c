// A progress line for long loops (training epochs, benchmarks). On a terminal it redraws one
// line in place with '\r', at most ~10 times a second; elsewhere (a log file, the launcher's
// pipe) it emits a plain log line at most every `plain_every`, so logs stay readable.
// One thread drives a ProgressLine.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace murmur {

// True iff stderr is a terminal.
bool stderr_is_terminal();

class ProgressLine {
 public:
  using Clock = std::chrono::steady_clock;
  using PlainSink = std::function<void(std::string_view)>;

  // Plain lines go to log().info unless set_outputs() says otherwise.
  explicit ProgressLine(bool interactive = stderr_is_terminal(),
                        std::chrono::milliseconds plain_every = std::chrono::seconds(10));
  // Ends a redrawn line that finish() never ended, so the next output starts on its own line.
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void update(std::string_view text) { update(text, Clock::now()); }
  // The same at a given time (tests drive the clock by hand).
  void update(std::string_view text, Clock::time_point now);
  // Always shown: the final redraw plus a newline, or one plain line.
  void finish(std::string_view text);

  // Redraws go to `terminal` (default stderr), plain lines to `plain` (default log().info).
  void set_outputs(std::FILE* terminal, PlainSink plain);

 private:
  void draw(std::string_view text, bool end_line);

  bool interactive_;
  std::chrono::milliseconds plain_every_;
  std::FILE* terminal_ = stderr;
  PlainSink plain_;
  bool shown_any_ = false;
  bool line_open_ = false;  // a redrawn line without its newline yet
  Clock::time_point last_shown_{};
};

}  // namespace murmur
