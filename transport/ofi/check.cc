#include "transport/ofi/check.h"

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::transport::ofi {

void throw_fi(long ret, const char* expr, const char* file, int line) {
  throw TransportError(fmt::format("ofi: {}: {} ({}:{})", expr,
                                   fi_strerror(static_cast<int>(-ret)), file, line));
}

}  // namespace murmur::transport::ofi
