#include "transport/ucx/check.h"

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::transport::ucx {

void throw_ucs(ucs_status_t status, const char* expr, const char* file, int line) {
  throw TransportError(
      fmt::format("ucx: {}: {} ({}:{})", expr, ucs_status_string(status), file, line));
}

}  // namespace murmur::transport::ucx
