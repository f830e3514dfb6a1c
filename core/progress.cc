#include "core/progress.h"

#include <unistd.h>

#include "core/logging.h"

namespace murmur {
namespace {

// Faster redraws only cost terminal bandwidth; people read no more than a few per second.
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);

}  // namespace

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressLine::ProgressLine(bool interactive, std::chrono::milliseconds plain_every)
    : interactive_(interactive),
      plain_every_(plain_every),
      plain_([](std::string_view text) { log().info("{}", text); }) {}

ProgressLine::~ProgressLine() {
  if (line_open_) {
    std::fputc('\n', terminal_);
    std::fflush(terminal_);
  }
}

void ProgressLine::set_outputs(std::FILE* terminal, PlainSink plain) {
  terminal_ = terminal;
  plain_ = std::move(plain);
}

void ProgressLine::update(std::string_view text, Clock::time_point now) {
  const auto interval = interactive_ ? std::chrono::duration_cast<std::chrono::milliseconds>(kRedrawEvery)
                                     : plain_every_;
  if (shown_any_ && now - last_shown_ < interval) return;
  shown_any_ = true;
  last_shown_ = now;
  if (interactive_) {
    draw(text, false);
  } else {
    plain_(text);
  }
}

void ProgressLine::finish(std::string_view text) {
  if (interactive_) {
    draw(text, true);
  } else {
    plain_(text);
  }
  shown_any_ = false;  // a following update starts afresh
}

void ProgressLine::draw(std::string_view text, bool end_line) {
  // "\x1b[K" clears what a longer previous text left to the right.
  std::fprintf(terminal_, "\r%.*s\x1b[K", static_cast<int>(text.size()), text.data());
  if (end_line) std::fputc('\n', terminal_);
  std::fflush(terminal_);
  line_open_ = !end_line;
}

}  // namespace murmur
