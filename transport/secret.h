// The shared secret that authenticates the handshake between ranks. Read once, at transport
// construction, from transport.secret_file or else the environment variable named by
// transport.secret_env. With neither set the secret is empty: the handshake still runs (with an
// empty HMAC key) and a warning is logged once per process. Thread-safe.
#pragma once

#include <string>

#include "core/config.h"

namespace murmur::transport {

// Returns the secret bytes (a trailing newline of the file is dropped). Throws ConfigError if
// transport.secret_file is set but cannot be read.
std::string load_secret(const TransportConfig& config);

}  // namespace murmur::transport
