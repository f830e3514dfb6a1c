// The exception hierarchy of murmur. Every failure that ends a step (bad config, bad data,
// a dead peer, a corrupt frame, a CUDA fault) is thrown as one of these, carrying enough
// context (file, line, key, peer, call) for the main to print one clear line and exit nonzero.
// Expected outcomes (a wait that times out, an optional message) are values, not exceptions.
// Visible from libmurmur.so (api/), which hides everything else: a program catches them by type.
#pragma once

#include <stdexcept>
#include <string>

namespace murmur {

class [[gnu::visibility("default")]] Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A config file, a --set override or a cross-field rule is wrong; the message names
// "file:line: key.path: what".
class [[gnu::visibility("default")]] ConfigError : public Error {
 public:
  using Error::Error;
};

// A dataset file is missing, truncated or malformed; the message names the file.
class [[gnu::visibility("default")]] DataError : public Error {
 public:
  using Error::Error;
};

// A checkpoint (safetensors) cannot be written, or read back as valid; names the file.
class [[gnu::visibility("default")]] CheckpointError : public Error {
 public:
  using Error::Error;
};

// Any other file-system or OS failure; names the path and strerror.
class [[gnu::visibility("default")]] IoError : public Error {
 public:
  using Error::Error;
};

// A transport call failed; names the backend, peer rank, call and status string.
class [[gnu::visibility("default")]] TransportError : public Error {
 public:
  using Error::Error;
};

// A peer closed its connection or stopped answering within its deadline.
class [[gnu::visibility("default")]] PeerLost : public TransportError {
 public:
  using TransportError::TransportError;
};

// A peer that has left the run in order (finished, or stopped by a signal), as the rendezvous
// says: nobody will answer for it.
class [[gnu::visibility("default")]] PeerLeft : public PeerLost {
 public:
  using PeerLost::PeerLost;
};

// A peer sent bytes that break the wire format: magic, version, length bound or checksum.
class [[gnu::visibility("default")]] ProtocolError : public TransportError {
 public:
  using TransportError::TransportError;
};

// The handshake failed: the other side does not hold the shared secret.
class [[gnu::visibility("default")]] AuthError : public TransportError {
 public:
  using TransportError::TransportError;
};

// A CUDA, cuBLAS or cuDNN call failed; names the call, file and line.
class [[gnu::visibility("default")]] CudaError : public Error {
 public:
  using Error::Error;
};

}  // namespace murmur
