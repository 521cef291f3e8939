// The Python boundary's array rules (see module_arrays.hpp).

#include "module_arrays.hpp"

#include "module_dlpack_exchange.hpp"

#include <cstdint>
#include <string>

namespace kvcanary {
namespace python {

namespace {

std::string prefix(const char* function, const std::string& name) {
  return std::string("kvcanary.") + function + ": " + name + " ";
}

std::string object_type_name(nb::handle h) { return nb::type_name(h.type()).c_str(); }

std::string shape_text(const Arg& a) {
  std::string s = "(";
  for (int i = 0; i < a.ndim && i < kept_dims; ++i) s += (i ? ", " : "") + std::to_string(a.shape[i]);
  if (a.ndim > kept_dims) s += ", ... (" + std::to_string(a.ndim) + "-D)";
  return s + (a.ndim == 1 ? ",)" : ")");
}

std::string strides_text(const Arg& a) {
  std::string s = "(";
  for (int i = 0; i < a.ndim; ++i) s += (i ? ", " : "") + std::to_string(a.stride[i]);
  return s + (a.ndim == 1 ? ",)" : ")") + " elements";
}

// The fields of an imported array: the first kept_dims extents and strides (every rule refuses rank > 2;
// the rest serve its message).
void fill(Arg& a, const ExchangedArray& array) {
  a.pointer = array.data;
  a.dtype = array.dtype;
  a.ndim = array.ndim;
  if (a.ndim < 0) value_error(a.function, a.name, "claims rank " + std::to_string(a.ndim) + " (a broken DLPack producer)");
  for (int i = 0; i < a.ndim && i < kept_dims; ++i) {
    a.shape[i] = array.shape[i];
    a.stride[i] = array.stride[i];
    // What a producer says is trusted for its memory, but a negative extent would size a View as ~0.
    if (a.shape[i] < 0)
      value_error(a.function, a.name,
                  "claims extent " + std::to_string(a.shape[i]) + " in dimension " + std::to_string(i) + " (a broken DLPack producer)");
  }
  const int device = array.device_type;
  if (device == nb::device::cpu::value) {
    a.location = Location{false, 0};
  } else if (device == nb::device::cuda::value) {
    a.location = Location{true, array.device_id};
  } else if (device == nb::device::cuda_host::value || device == nb::device::cuda_managed::value) {
    value_error(a.function, a.name, "is in pinned or managed CUDA memory; kvcanary takes host or CUDA device memory");
  } else {
    value_error(a.function, a.name,
                "is on DLPack device type " + std::to_string(device) + "; kvcanary takes cpu or cuda arrays");
  }
}

template <class Array>
void fill(Arg& a, const Array& array) {
  ExchangedArray e;
  e.data = const_cast<void*>(static_cast<const void*>(array.data()));
  e.dtype = array.dtype();
  e.ndim = static_cast<int>(array.ndim());
  for (int i = 0; i < e.ndim && i < kept_dims; ++i) {
    e.shape[i] = static_cast<std::int64_t>(array.shape(static_cast<size_t>(i)));
    e.stride[i] = array.stride(static_cast<size_t>(i));
  }
  e.device_type = array.device_type();
  e.device_id = array.device_id();
  fill(a, e);
}

const char* dtype_word(DType d) {
  switch (d) {
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::UInt8: return "uint8";
    default: return "any";
  }
}

bool is(const nb::dlpack::dtype& d, DType want) {
  const auto code = static_cast<std::uint8_t>(want == DType::UInt8 ? nb::dlpack::dtype_code::UInt : nb::dlpack::dtype_code::Int);
  const int bits = want == DType::Int32 ? 32 : want == DType::Int64 ? 64 : 8;
  return want == DType::Any || (d.code == code && d.bits == bits && d.lanes == 1);
}

}  // namespace

void type_error(const char* function, const std::string& name, const std::string& what) {
  throw nb::type_error((prefix(function, name) + what).c_str());
}
void value_error(const char* function, const std::string& name, const std::string& what) {
  throw nb::value_error((prefix(function, name) + what).c_str());
}

std::string dtype_name(const nb::dlpack::dtype& d) {
  std::string base;
  switch (static_cast<nb::dlpack::dtype_code>(d.code)) {
    case nb::dlpack::dtype_code::Int: base = "int"; break;
    case nb::dlpack::dtype_code::UInt: base = "uint"; break;
    case nb::dlpack::dtype_code::Float: base = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: base = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: base = "complex"; break;
    case nb::dlpack::dtype_code::Bool: return "bool";
    default: base = "code" + std::to_string(d.code) + "_";
  }
  return base + std::to_string(d.bits) + (d.lanes != 1 ? "x" + std::to_string(d.lanes) : "");
}

Arg import_array(nb::handle h, const char* function, const char* name, bool writable) {
  Arg a;
  a.function = function;
  a.name = name;
  if (h.is_none()) type_error(function, name, "is required, got None");
  a.owner = nb::borrow(h);
  // The producer's C exchange table first (torch >= 2.10): tens of ns instead of ~1 µs through __dlpack__.
  ExchangedArray exchanged;
  if (exchange_describe(h, writable, exchanged)) {
    if (writable && exchanged.read_only) value_error(function, name, "is read-only; kvcanary writes its results into it");
    fill(a, exchanged);
    return a;
  }
  bool ok = false;
  nb::ndarray<nb::ro> ro;
  if (writable) {
    nb::ndarray<> rw;
    ok = nb::try_cast(h, rw, false);
    if (ok) fill(a, rw);
    else if (nb::try_cast(h, ro, false)) value_error(function, name, "is read-only; kvcanary writes its results into it");
  } else {
    ok = nb::try_cast(h, ro, false);
    if (ok) fill(a, ro);
  }
  if (!ok) {
    if (nb::hasattr(h, "requires_grad") && nb::hasattr(h, "__dlpack__") &&
        nb::cast<bool>(h.attr("requires_grad")))
      type_error(function, name, "is a tensor that requires grad, which DLPack cannot export; pass it .detach()ed");
    type_error(function, name, "must be an array (numpy, torch, cupy: DLPack or the buffer protocol), got " + object_type_name(h));
  }
  // A numpy array can be writable to nanobind's buffer request only when its flags say so; ro imports
  // do not ask, so look at the flag of the object itself.
  if (writable && nb::hasattr(h, "flags")) {
    nb::object flags = h.attr("flags");
    if (nb::hasattr(flags, "writeable") && !nb::cast<bool>(flags.attr("writeable")))
      value_error(function, name, "is read-only; kvcanary writes its results into it");
  }
  return a;
}

void check_dtype(const Arg& a, DType want) {
  if (!is(a.dtype, want))
    type_error(a.function, a.name,
               std::string("must have dtype ") + dtype_word(want) + ", got " + dtype_name(a.dtype));
}

std::int64_t check_vector(const Arg& a, DType want) {
  check_dtype(a, want);
  if (a.ndim != 1) value_error(a.function, a.name, "must be 1-D, got shape " + shape_text(a));
  if (a.shape[0] > 1 && a.stride[0] != 1)
    value_error(a.function, a.name, "must be contiguous, got strides " + strides_text(a));
  if (a.shape[0] > 0 && reinterpret_cast<std::uintptr_t>(a.data()) % a.itemsize() != 0)
    value_error(a.function, a.name, "is not aligned to its element size");
  return a.size(0);
}

void check_scalar(const Arg& a, DType want) {
  check_dtype(a, want);
  if (!(a.ndim == 0 || (a.ndim == 1 && a.shape[0] == 1)))
    value_error(a.function, a.name, "must be a scalar of shape () or (1,), got shape " + shape_text(a));
  if (reinterpret_cast<std::uintptr_t>(a.data()) % a.itemsize() != 0)
    value_error(a.function, a.name, "is not aligned to its element size");
}

std::int64_t check_matrix(const Arg& a, DType want) {
  check_dtype(a, want);
  if (a.ndim != 2) value_error(a.function, a.name, "must be 2-D, got shape " + shape_text(a));
  const std::int64_t rows = a.size(0), cols = a.size(1);
  if (cols > 1 && a.stride[1] != 1)
    value_error(a.function, a.name, "must have contiguous rows (column stride 1), got strides " + strides_text(a));
  const std::int64_t row_stride = rows > 1 ? a.stride[0] : cols;
  if (rows > 1 && row_stride < cols)
    value_error(a.function, a.name, "has overlapping rows, strides " + strides_text(a));
  if (rows * cols > 0 && reinterpret_cast<std::uintptr_t>(a.data()) % a.itemsize() != 0)
    value_error(a.function, a.name, "is not aligned to its element size");
  return row_stride;
}

void check_same_location(const Arg& first, const Arg& other) {
  if (!(first.location == other.location))
    value_error(other.function, other.name,
                "is on " + other.location.text() + " but " + first.name + " is on " + first.location.text() +
                    "; all arrays of a call must be on one device");
}

Arg vector_arg(nb::handle h, const char* function, const char* name, DType want, bool writable) {
  Arg a = import_array(h, function, name, writable);
  check_vector(a, want);
  return a;
}

Arg scalar_arg(nb::handle h, const char* function, const char* name, DType want, bool writable) {
  Arg a = import_array(h, function, name, writable);
  check_scalar(a, want);
  return a;
}

nb::list ring_rows(const std::vector<std::int64_t>& flat) {
  nb::list rows;
  for (size_t i = 0; i + 8 <= flat.size(); i += 8) {
    nb::list row;
    for (size_t k = 0; k < 8; ++k) row.append(flat[i + k]);
    rows.append(nb::tuple(row));
  }
  return rows;
}

}  // namespace python
}  // namespace kvcanary
