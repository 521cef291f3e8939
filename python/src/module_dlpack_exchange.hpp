#ifndef KVCANARY_PY_MODULE_DLPACK_EXCHANGE_HPP
#define KVCANARY_PY_MODULE_DLPACK_EXCHANGE_HPP

// The DLPack C exchange API (DLPack >= 1.2; torch >= 2.10 publishes it): a producer puts a table of C
// functions on its array *type* as `__dlpack_c_exchange_api__`, a capsule named "dlpack_exchange_api".
// Describing a tensor through it takes tens of nanoseconds, where `obj.__dlpack__()` -- a Python method
// building a capsule, plus a stream handshake on CUDA -- took ~1 µs per torch tensor (docs/PERFORMANCE.md,
// "Python host overhead per call"). No synchronisation is asked for: kvcanary launches on the
// framework's current stream (docs/python.md), the stream the producer's work is ordered on.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>

namespace kvcanary {
namespace python {

namespace nb = nanobind;

// The extents (and strides) an imported array keeps: enough for the error messages of every rule.
constexpr int kept_dims = 4;

// What one exchange says about an array: the DLTensor's fields, with the first kept_dims extents and
// strides copied (the producer's own arrays are only valid until we return).
struct ExchangedArray {
  void* data = nullptr;  // byte_offset already added
  nb::dlpack::dtype dtype{};
  int device_type = 0;
  int device_id = 0;
  int ndim = 0;
  std::int64_t shape[kept_dims] = {};
  std::int64_t stride[kept_dims] = {};
  bool read_only = false;  // the producer's read-only flag (asked for only when `writable`)
};

// Describes `h` through its type's exchange table when it has one. Returns false -- with no Python error
// set -- when the type has none or the producer refuses this object (e.g. a tensor that requires grad),
// so that the caller falls back to `__dlpack__` / the buffer protocol and its error messages.
// `writable`: ask for the producer's read-only flag (an owning export, released at once).
bool exchange_describe(nb::handle h, bool writable, ExchangedArray& out);

}  // namespace python
}  // namespace kvcanary

#endif
