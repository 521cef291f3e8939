#ifndef KVCANARY_PY_MODULE_ARRAYS_HPP
#define KVCANARY_PY_MODULE_ARRAYS_HPP

// The Python boundary's array rules (docs/python.md): an argument is taken through DLPack or the buffer
// protocol as it is -- never converted, never copied -- and every dtype, rank, shape, contiguity, device,
// alignment and writability rule is checked before anything runs. A wrong type of object or dtype raises
// TypeError, anything else ValueError; every message starts "kvcanary.<function>: <argument> ".

#include "core.hpp"
#include "module_dlpack_exchange.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kvcanary {
namespace python {

namespace nb = nanobind;

enum class DType { Int32, Int64, UInt8, Any };

// Where an array lives: host memory, or one CUDA device.
struct Location {
  bool cuda = false;
  int device_id = 0;
  bool operator==(const Location& o) const { return cuda == o.cuda && (!cuda || device_id == o.device_id); }
  std::string text() const { return cuda ? "cuda:" + std::to_string(device_id) : "cpu"; }
};

// One imported argument: what DLPack / the buffer protocol said about it, and the object itself (kept
// alive by whoever holds the Arg: a bound object keeps its arrays for its lifetime).
struct Arg {
  nb::object owner;
  void* pointer = nullptr;
  nb::dlpack::dtype dtype{};
  int ndim = 0;
  std::int64_t shape[kept_dims] = {};  // the first kept_dims extents and strides (every rule takes rank <= 2)
  std::int64_t stride[kept_dims] = {};
  const char* function = "";
  const char* name = "";
  Location location;
  void* data() const { return pointer; }
  std::int64_t size(int i) const { return shape[i]; }
  std::size_t itemsize() const { return (dtype.bits + 7) / 8; }
};

[[noreturn]] void type_error(const char* function, const std::string& name, const std::string& what);
[[noreturn]] void value_error(const char* function, const std::string& name, const std::string& what);

// Imports `h` without conversion; `writable`: the caller's memory is written (a read-only array is refused).
Arg import_array(nb::handle h, const char* function, const char* name, bool writable);

std::string dtype_name(const nb::dlpack::dtype& d);
void check_dtype(const Arg& a, DType want);
// 1-D C-contiguous vector of `want`; returns its length.
std::int64_t check_vector(const Arg& a, DType want);
// () or (1,) scalar of `want`.
void check_scalar(const Arg& a, DType want);
// 2-D with unit column stride; returns the row stride in elements.
std::int64_t check_matrix(const Arg& a, DType want);

// Every array of a call lives where the first one does.
void check_same_location(const Arg& first, const Arg& other);

// Import helpers that do the whole rule for one argument.
Arg vector_arg(nb::handle h, const char* function, const char* name, DType want, bool writable);
Arg scalar_arg(nb::handle h, const char* function, const char* name, DType want, bool writable);

// Bound canary records and real-KV sources (kvcanary.CanaryBuffer, kvcanary.RealKv): checked once, held.
struct BoundBuffer {
  Arg bytes;
  BufferArgs args;
};

struct BoundRealKv {
  std::vector<Arg> arrays;
  RealKvArgs args;
};

// backend: None, 'serial', 'openmp' or 'cuda'; stream: for CUDA arrays (None: the framework's current one).
Backend parse_backend(const char* function, const nb::object& backend);
Place make_place(const char* function, const Location& where, const nb::object& backend, const nb::object& stream);

// Ring rows (8 int64 each, flat) as a list of 8-tuples.
nb::list ring_rows(const std::vector<std::int64_t>& flat);

// kvcanary.Canary and its bound batch objects (module_canary.cpp).
void bind_canary(nb::module_& m);

template <class T>
Vec<T> as_vec(const Arg& a) {
  return Vec<T>{static_cast<T*>(a.data()), a.size(0)};
}

}  // namespace python
}  // namespace kvcanary

#endif
