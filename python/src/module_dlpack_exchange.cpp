// The DLPack C exchange API fast path (see module_dlpack_exchange.hpp).

#include "module_dlpack_exchange.hpp"

#include <cstdint>
#include <vector>

namespace kvcanary {
namespace python {

namespace {

// The DLPack 1.x ABI of the exchange table and of an owning export, as the DLPack standard defines them
// (dlpack.h, DLPackExchangeAPI and DLManagedTensorVersioned); nanobind's dltensor is the standard's DLTensor.
struct Version {
  std::uint32_t major;
  std::uint32_t minor;
};

struct ManagedVersioned {
  Version version;
  void* manager_ctx;
  void (*deleter)(ManagedVersioned*);
  std::uint64_t flags;
  nb::dlpack::dltensor dl_tensor;
};

constexpr std::uint64_t flag_read_only = 1u << 0;  // DLPACK_FLAG_BITMASK_READ_ONLY
constexpr std::uint64_t flag_is_copied = 1u << 1;  // DLPACK_FLAG_BITMASK_IS_COPIED

struct ApiHeader {
  Version version;
  ApiHeader* prev_api;
};

struct Api {
  ApiHeader header;
  void* managed_tensor_allocator;
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, ManagedVersioned** out);
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, nb::dlpack::dltensor* out);  // may be null
  void* current_work_stream;
};

constexpr std::uint32_t supported_major = 1;

// The table a type publishes, walked back to a version this ABI knows; null when none.
const Api* lookup(PyTypeObject* type) {
  PyObject* capsule = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack_c_exchange_api__");
  if (!capsule) {
    PyErr_Clear();
    return nullptr;
  }
  void* pointer = PyCapsule_IsValid(capsule, "dlpack_exchange_api") ? PyCapsule_GetPointer(capsule, "dlpack_exchange_api")
                                                                  : nullptr;
  Py_DECREF(capsule);  // the table itself lives as long as the process (the standard's rule)
  PyErr_Clear();
  for (auto* header = static_cast<ApiHeader*>(pointer); header; header = header->prev_api)
    if (header->version.major == supported_major) {
      const Api* api = reinterpret_cast<const Api*>(header);
      return api->managed_tensor_from_py_object_no_sync ? api : nullptr;
    }
  return nullptr;
}

// A process sees a handful of array types (numpy, torch, CuPy): a short list, each type held by a
// reference so that its address is never reused by another type. Past the cap, types are looked up
// every time rather than growing the list.
const Api* api_of(PyTypeObject* type) {
  struct Entry {
    PyTypeObject* type;
    const Api* api;
  };
  static std::vector<Entry> entries;  // only touched with the GIL held
  for (const Entry& e : entries)
    if (e.type == type) return e.api;
  const Api* api = lookup(type);
  constexpr std::size_t cap = 32;
  if (entries.size() < cap) {
    Py_INCREF(type);
    entries.push_back({type, api});
  }
  return api;
}

void copy_fields(const nb::dlpack::dltensor& t, ExchangedArray& out) {
  out.data = static_cast<char*>(t.data) + t.byte_offset;
  out.dtype = t.dtype;
  out.device_type = t.device.device_type;
  out.device_id = t.device.device_id;
  out.ndim = t.ndim;
  // Null strides mean row-major and compact (the standard's rule).
  std::int64_t compact = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    if (i < kept_dims) {
      out.shape[i] = t.shape[i];
      out.stride[i] = t.strides ? t.strides[i] : compact;
    }
    compact *= t.shape[i];
  }
}

}  // namespace

bool exchange_describe(nb::handle h, bool writable, ExchangedArray& out) {
  const Api* api = api_of(Py_TYPE(h.ptr()));
  if (!api) return false;
  if (!writable && api->dltensor_from_py_object_no_sync) {
    nb::dlpack::dltensor t;
    if (api->dltensor_from_py_object_no_sync(h.ptr(), &t) != 0) {
      PyErr_Clear();
      return false;
    }
    copy_fields(t, out);
    return true;
  }
  // An owning export carries the producer's flags; it is released at once: the caller holds the object,
  // which keeps the memory alive as it does for every other import.
  ManagedVersioned* managed = nullptr;
  if (api->managed_tensor_from_py_object_no_sync(h.ptr(), &managed) != 0 || !managed) {
    PyErr_Clear();
    return false;
  }
  const bool copied = (managed->flags & flag_is_copied) != 0;
  copy_fields(managed->dl_tensor, out);
  out.read_only = (managed->flags & flag_read_only) != 0;
  if (managed->deleter) managed->deleter(managed);
  return !copied;  // a copy would not be the caller's memory: let the usual import decide
}

}  // namespace python
}  // namespace kvcanary
