// The one checking helper for libfabric calls, and the RAII handles of the fabric objects murmur
// owns. MURMUR_FI_CHECK(expr) throws TransportError naming the expression, fi_strerror(-ret),
// file and line when `expr` returns a negative value. Handles close through fi_close(&obj->fid).
#pragma once

#include <memory>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

namespace murmur::transport::ofi {

// Throws TransportError("ofi: <expr>: <fi_strerror> (<file>:<line>)"); never returns.
[[noreturn]] void throw_fi(long ret, const char* expr, const char* file, int line);

#define MURMUR_FI_CHECK(expr)                                                            \
  do {                                                                                   \
    long murmur_fi_ret_ = static_cast<long>(expr);                                       \
    if (murmur_fi_ret_ < 0) {                                                            \
      ::murmur::transport::ofi::throw_fi(murmur_fi_ret_, #expr, __FILE__, __LINE__);     \
    }                                                                                    \
  } while (0)

struct FidClose {
  template <class T>
  void operator()(T* p) const noexcept {
    fi_close(&p->fid);
  }
};
struct InfoFree {
  void operator()(fi_info* p) const noexcept { fi_freeinfo(p); }
};

using Info = std::unique_ptr<fi_info, InfoFree>;
using Fabric = std::unique_ptr<fid_fabric, FidClose>;
using Domain = std::unique_ptr<fid_domain, FidClose>;
using AddressVector = std::unique_ptr<fid_av, FidClose>;
using CompletionQueue = std::unique_ptr<fid_cq, FidClose>;
using Endpoint = std::unique_ptr<fid_ep, FidClose>;
using MemoryRegion = std::unique_ptr<fid_mr, FidClose>;

}  // namespace murmur::transport::ofi
