// The one checking helper for UCS/UCP calls, and the RAII handles of the UCX objects murmur
// owns. MURMUR_UCS_CHECK(expr) throws TransportError naming the expression, the UCS status
// string, file and line. The handles free in the order the owning class declares them.
#pragma once

#include <memory>
#include <string>

#include <ucp/api/ucp.h>

namespace murmur::transport::ucx {

// Throws TransportError("ucx: <expr>: <status> (<file>:<line>)"); never returns.
[[noreturn]] void throw_ucs(ucs_status_t status, const char* expr, const char* file, int line);

#define MURMUR_UCS_CHECK(expr)                                               \
  do {                                                                       \
    ucs_status_t murmur_ucs_status_ = (expr);                                \
    if (murmur_ucs_status_ != UCS_OK) {                                      \
      ::murmur::transport::ucx::throw_ucs(murmur_ucs_status_, #expr, __FILE__, \
                                          __LINE__);                         \
    }                                                                        \
  } while (0)

template <auto Fn>
struct CallFree {
  template <class T>
  void operator()(T* p) const noexcept {
    Fn(p);
  }
};

using Config = std::unique_ptr<ucp_config_t, CallFree<&ucp_config_release>>;
using Context = std::unique_ptr<ucp_context, CallFree<&ucp_cleanup>>;
using Worker = std::unique_ptr<ucp_worker, CallFree<&ucp_worker_destroy>>;
using RkeyBuffer = std::unique_ptr<void, CallFree<&ucp_rkey_buffer_release>>;
using RemoteKey = std::unique_ptr<ucp_rkey, CallFree<&ucp_rkey_destroy>>;

// A worker address returned by ucp_worker_get_address, released against its worker.
struct WorkerAddressFree {
  ucp_worker_h worker = nullptr;
  void operator()(ucp_address_t* a) const noexcept { ucp_worker_release_address(worker, a); }
};
using WorkerAddress = std::unique_ptr<ucp_address_t, WorkerAddressFree>;

}  // namespace murmur::transport::ucx
