// kvcanary._core: the nanobind module. Argument checks and Python objects only; no Kokkos header here
// (core.cpp runs the stages). The Python package (python/kvcanary/) wraps this in keyword-only functions.
//
// Bound objects (VerifyPlan, WritePlan, PlanStatus, PlanWorkspace, CanaryBuffer, ViolationRing, RealKv)
// import and check their arrays once, hold them (so their owners stay alive) and keep the pointers, so a
// step call imports only that step's arrays.

#include "core.hpp"
#include "module_arrays.hpp"
#include "module_dlpack_exchange.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace kvcanary {
namespace python {

// ---- the place of a call (module_arrays.hpp) ----

Backend parse_backend(const char* function, const nb::object& backend) {
  if (backend.is_none()) return Backend::Default;
  const std::string b = nb::cast<std::string>(backend);
  if (b == "serial") return Backend::Serial;
  if (b == "openmp") return Backend::OpenMP;
  if (b == "cuda") return Backend::Cuda;
  value_error(function, "backend", "must be None, 'serial', 'openmp' or 'cuda', got '" + b + "'");
}

Place make_place(const char* function, const Location& where, const nb::object& backend, const nb::object& stream) {
  Place place;
  place.backend = parse_backend(function, backend);
  place.cuda = where.cuda;
  place.device_id = where.device_id;
  if (where.cuda) {
    if (place.backend != Backend::Default && place.backend != Backend::Cuda)
      value_error(function, "backend", "is a host backend but the arrays are on " + where.text());
    // None: the current stream of the arrays' framework on their device (torch, then cupy).
    // Leaked on purpose: a static nb::object would be released by C++ static destruction, after the
    // interpreter has gone (docs/GPU.md, "The exit crash").
    static nb::handle resolve = nb::object(nb::module_::import_("kvcanary._streams").attr("resolve")).release();
    place.stream = nb::cast<std::uintptr_t>(resolve(stream, where.device_id));
  } else if (!stream.is_none()) {
    value_error(function, "stream", "is only for CUDA arrays; these arrays are on the host");
  }
  return place;
}

namespace {

struct BoundVerifyPlan {
  Arg slot_indices, expected_tokens, expected_positions, prev_slot_indices, num_valid, enable;
  bool has_identities = false;  // SPEC-CANARY §11.7
  Arg identities;
  std::int64_t capacity() const { return slot_indices.size(0); }
};

struct BoundWritePlan {
  Arg write_offsets, write_seed_slot_indices, write_num_valid_reqs;
  bool has_identities = false;  // SPEC-CANARY §11.7
  Arg identities;
  std::int64_t capacity() const { return write_seed_slot_indices.size(0); }
};

struct BoundStatus {
  Arg input_error_bits, first_bad_row;
};

struct BoundWorkspace {
  Arg verify_offsets;
};

struct BoundRing {
  Arg rows, count, slot_run_counter, kernel_run_counter;
  RingArgs args;
};

// ---- constructors: every check of the bound arrays, once ----

// A plan's optional identity array (SPEC-CANARY §11.7): int64, one entry per `capacity_name` entry.
bool plan_identities(nb::handle h, const char* f, const char* name, const Arg& first, const char* capacity_name,
                     std::int64_t capacity, Arg& out) {
  if (h.is_none()) return false;
  out = vector_arg(h, f, name, DType::Int64, true);
  check_same_location(first, out);
  if (out.size(0) != capacity)
    value_error(f, name, "has " + std::to_string(out.size(0)) + " entries, " + capacity_name + " has " +
                             std::to_string(capacity));
  return true;
}

BoundVerifyPlan make_verify_plan(nb::handle slot_indices, nb::handle expected_tokens, nb::handle expected_positions,
                                 nb::handle prev_slot_indices, nb::handle num_valid, nb::handle enable,
                                 nb::handle identities) {
  constexpr const char* f = "VerifyPlan";
  BoundVerifyPlan p;
  p.slot_indices = vector_arg(slot_indices, f, "verify_slot_indices", DType::Int64, true);
  p.expected_tokens = vector_arg(expected_tokens, f, "verify_expected_tokens", DType::Int64, true);
  p.expected_positions = vector_arg(expected_positions, f, "verify_expected_positions", DType::Int64, true);
  p.prev_slot_indices = vector_arg(prev_slot_indices, f, "verify_prev_slot_indices", DType::Int64, true);
  p.num_valid = scalar_arg(num_valid, f, "verify_num_valid", DType::Int32, true);
  p.enable = scalar_arg(enable, f, "enable", DType::Int32, true);
  for (const Arg* a : {&p.expected_tokens, &p.expected_positions, &p.prev_slot_indices, &p.num_valid, &p.enable})
    check_same_location(p.slot_indices, *a);
  for (const Arg* a : {&p.expected_tokens, &p.expected_positions, &p.prev_slot_indices})
    if (a->size(0) != p.capacity())
      value_error(f, a->name, "has " + std::to_string(a->size(0)) + " entries, verify_slot_indices has " +
                                  std::to_string(p.capacity()) + "; the four verify arrays must have one length");
  p.has_identities = plan_identities(identities, f, "verify_identities", p.slot_indices, "verify_slot_indices",
                                     p.capacity(), p.identities);
  return p;
}

BoundWritePlan make_write_plan(nb::handle write_offsets, nb::handle write_seed_slot_indices,
                               nb::handle write_num_valid_reqs, nb::handle identities) {
  constexpr const char* f = "WritePlan";
  BoundWritePlan p;
  p.write_offsets = vector_arg(write_offsets, f, "write_offsets", DType::Int64, true);
  p.write_seed_slot_indices = vector_arg(write_seed_slot_indices, f, "write_seed_slot_indices", DType::Int64, true);
  p.write_num_valid_reqs = scalar_arg(write_num_valid_reqs, f, "write_num_valid_reqs", DType::Int32, true);
  check_same_location(p.write_offsets, p.write_seed_slot_indices);
  check_same_location(p.write_offsets, p.write_num_valid_reqs);
  if (p.write_offsets.size(0) != p.capacity() + 1)
    value_error(f, "write_offsets", "has " + std::to_string(p.write_offsets.size(0)) +
                                        " entries, must be len(write_seed_slot_indices) + 1 = " +
                                        std::to_string(p.capacity() + 1));
  p.has_identities = plan_identities(identities, f, "write_identities", p.write_offsets, "write_seed_slot_indices",
                                     p.capacity(), p.identities);
  return p;
}

BoundStatus make_status(nb::handle input_error_bits, nb::handle first_bad_row) {
  BoundStatus s;
  s.input_error_bits = scalar_arg(input_error_bits, "PlanStatus", "input_error_bits", DType::Int32, true);
  s.first_bad_row = scalar_arg(first_bad_row, "PlanStatus", "first_bad_row", DType::Int32, true);
  check_same_location(s.input_error_bits, s.first_bad_row);
  return s;
}

BoundWorkspace make_workspace(nb::handle verify_offsets) {
  BoundWorkspace w;
  w.verify_offsets = vector_arg(verify_offsets, "PlanWorkspace", "verify_offsets", DType::Int64, true);
  if (w.verify_offsets.size(0) < 1)
    value_error("PlanWorkspace", "verify_offsets", "must have max_batch_size + 1 >= 1 entries, got 0");
  return w;
}

// An engine's canary bytes: any dtype, 2-D [num_slots, row], rows of >= 32 bytes whose start is 8-byte aligned,
// row stride a multiple of 8 bytes (SPEC-CANARY §1).
BoundBuffer make_buffer(nb::handle records) {
  constexpr const char* f = "CanaryBuffer";
  BoundBuffer b;
  b.bytes = import_array(records, f, "records", true);
  const Arg& a = b.bytes;
  const std::int64_t row_stride = check_matrix(a, DType::Any);
  const std::int64_t item = static_cast<std::int64_t>(a.itemsize());
  const std::int64_t row_bytes = a.size(1) * item;
  const std::int64_t stride_bytes = a.size(0) > 1 ? row_stride * item : row_bytes;
  if (row_bytes < 32)
    value_error(f, "records", "rows hold " + std::to_string(row_bytes) + " bytes, a record needs 32");
  if (stride_bytes % 8 != 0)
    value_error(f, "records", "rows are " + std::to_string(stride_bytes) + " bytes apart, must be a multiple of 8");
  if (reinterpret_cast<std::uintptr_t>(a.data()) % 8 != 0)
    value_error(f, "records", "does not start at an 8-byte aligned address");
  b.args = BufferArgs{a.data(), a.size(0), stride_bytes};
  return b;
}

BoundRing make_ring(nb::handle rows, nb::handle count, nb::handle slot_run_counter, nb::handle kernel_run_counter) {
  constexpr const char* f = "ViolationRing";
  BoundRing r;
  r.rows = import_array(rows, f, "rows", true);
  check_dtype(r.rows, DType::Int64);
  if (r.rows.ndim != 2 || r.rows.size(1) != 8)
    value_error(f, "rows", "must have shape (capacity, 8)");
  if (r.rows.size(0) > 0 && (r.rows.stride[1] != 1 || (r.rows.size(0) > 1 && r.rows.stride[0] != 8)))
    value_error(f, "rows", "must be C-contiguous");
  if (reinterpret_cast<std::uintptr_t>(r.rows.data()) % 8 != 0) value_error(f, "rows", "is not 8-byte aligned");
  r.count = scalar_arg(count, f, "count", DType::Int64, true);
  r.slot_run_counter = scalar_arg(slot_run_counter, f, "slot_run_counter", DType::Int64, true);
  r.kernel_run_counter = scalar_arg(kernel_run_counter, f, "kernel_run_counter", DType::Int64, true);
  for (const Arg* a : {&r.count, &r.slot_run_counter, &r.kernel_run_counter}) check_same_location(r.rows, *a);
  r.args = RingArgs{static_cast<std::int64_t*>(r.rows.data()), r.rows.size(0),
                    static_cast<std::int64_t*>(r.count.data()), static_cast<std::int64_t*>(r.slot_run_counter.data()),
                    static_cast<std::int64_t*>(r.kernel_run_counter.data())};
  return r;
}

BoundRealKv make_real_kv(int mode, nb::list sources) {
  constexpr const char* f = "RealKv";
  if (mode < 0 || mode > 2) value_error(f, "mode", "must be 0 (none), 1 (partial) or 2 (all), got " + std::to_string(mode));
  BoundRealKv k;
  k.args.mode = mode;
  const size_t n = nb::len(sources);
  k.arrays.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    nb::tuple t = nb::cast<nb::tuple>(sources[i]);
    if (nb::len(t) != 4) value_error(f, "sources", "entries are (array, page_size, bytes_per_token, read_bytes)");
    static const char* const names[] = {"sources[0]", "sources[1]", "sources[2]", "sources[3]", "sources[4+]"};
    k.arrays.push_back(import_array(t[0], f, names[i < 4 ? i : 4], false));
    const Arg& a = k.arrays.back();
    const std::int64_t row_stride = check_matrix(a, DType::Any);
    const std::int64_t item = static_cast<std::int64_t>(a.itemsize());
    SourceArgs s;
    s.data = static_cast<const std::uint8_t*>(a.data());
    s.pages = a.size(0);
    s.row_bytes = a.size(1) * item;
    s.row_stride_bytes = row_stride * item;
    s.page_size = nb::cast<std::int64_t>(t[1]);
    s.bytes_per_token = nb::cast<std::int64_t>(t[2]);
    s.read_bytes = nb::cast<std::int64_t>(t[3]);
    k.args.sources.push_back(s);
  }
  for (size_t i = 1; i < k.arrays.size(); ++i) check_same_location(k.arrays[0], k.arrays[i]);
  return k;
}

RealKvArgs real_kv_args(const char* function, const Arg& first, const nb::handle real_kv) {
  if (real_kv.is_none()) return RealKvArgs{};
  const BoundRealKv& k = nb::cast<const BoundRealKv&>(real_kv);
  for (const Arg& a : k.arrays)
    if (!(a.location == first.location))
      value_error(function, "real_kv", "sources are on " + a.location.text() + " but " + first.name + " is on " +
                                           first.location.text());
  return k.args;
}

void same_place(const char* function, const Arg& first, const Arg& other, const char* name) {
  if (!(first.location == other.location))
    value_error(function, name, "is on " + other.location.text() + " but " + first.name + " is on " +
                                    first.location.text() + "; all arrays of a call must be on one device");
}

int parse_algorithm(const char* function, const std::string& a, bool plan) {
  if (a == "default") return 0;
  if (a == "portable") return 1;
  if (plan && a == "cuda-persistent") return 2;
  if (!plan && a == "cuda") return 2;
  value_error(function, "algorithm",
              std::string("must be 'default', 'portable' or ") + (plan ? "'cuda-persistent'" : "'cuda'") + ", got '" + a + "'");
}

void check_kind(const char* function, int kind) {
  if (kind < 0 || kind > 11) value_error(function, "kernel_kind", "must be a launch tag 0..11, got " + std::to_string(kind));
}

// The (buffer handle, kernel kind, RealKv handle or None) tuples of a verify() or write() call.
std::vector<TargetArgs> target_args(const char* function, const Arg& first, nb::list targets) {
  const size_t n = nb::len(targets);
  if (n < 1 || n > 4) value_error(function, "buffer", "must name 1 to 4 canary buffers, got " + std::to_string(n));
  std::vector<TargetArgs> out;
  for (size_t i = 0; i < n; ++i) {
    nb::tuple t = nb::cast<nb::tuple>(targets[i]);
    const BoundBuffer& b = nb::cast<const BoundBuffer&>(t[0]);
    same_place(function, first, b.bytes, "buffer");
    const int kind = nb::cast<int>(t[1]);
    check_kind(function, kind);
    out.push_back(TargetArgs{b.args, kind, real_kv_args(function, first, t[2])});
  }
  return out;
}

// ---- stages ----

// An optional int64 input vector of plan() (absent: None): imported into `arg` (which keeps it alive) and
// `out`, on the place of `first`. Returns whether it was given.
bool optional_input(nb::handle h, const char* f, const char* name, const Arg& first, Arg& arg,
                    Vec<const std::int64_t>& out) {
  if (h.is_none()) return false;
  arg = vector_arg(h, f, name, DType::Int64, false);
  check_same_location(first, arg);
  out = as_vec<const std::int64_t>(arg);
  return true;
}

void py_plan(nb::handle req_pool_indices, nb::handle prefix_lens, nb::handle extend_seq_lens, nb::handle req_to_token,
             const BoundVerifyPlan& vp, const BoundWritePlan& wp, const BoundStatus& st, const BoundWorkspace& ws,
             int swa_window_size, nb::handle lut, nb::handle pool, nb::handle valid_lens,
             int kv_token_id_vs_position_offset, nb::handle identities, const std::string& algorithm,
             nb::object backend, nb::object stream) {
  constexpr const char* f = "plan";
  PlanArgs a;
  const Arg rpi = vector_arg(req_pool_indices, f, "req_pool_indices", DType::Int64, false);
  const Arg pl = vector_arg(prefix_lens, f, "prefix_lens", DType::Int64, false);
  const Arg el = vector_arg(extend_seq_lens, f, "extend_seq_lens", DType::Int64, false);
  const Arg rtt = import_array(req_to_token, f, "req_to_token", false);
  const std::int64_t rtt_stride = check_matrix(rtt, DType::Int32);
  for (const Arg* x : {&pl, &el, &rtt}) check_same_location(rpi, *x);
  a.req_pool_indices = as_vec<const std::int64_t>(rpi);
  a.prefix_lens = as_vec<const std::int64_t>(pl);
  a.extend_seq_lens = as_vec<const std::int64_t>(el);
  a.req_to_token = Mat<const std::int32_t>{static_cast<const std::int32_t*>(rtt.data()), rtt.size(0), rtt.size(1), rtt_stride};
  a.swa_window_size = swa_window_size;
  Arg lut_arg, pool_arg, valid_arg, identities_arg;
  a.has_lut = optional_input(lut, f, "full_to_swa_index_mapping", rpi, lut_arg, a.lut);
  if (!pool.is_none()) {
    pool_arg = import_array(pool, f, "req_to_verify_expected_tokens", false);
    const std::int64_t stride = check_matrix(pool_arg, DType::Int32);
    check_same_location(rpi, pool_arg);
    a.has_pool = true;
    a.pool = Mat<const std::int32_t>{static_cast<const std::int32_t*>(pool_arg.data()), pool_arg.size(0),
                                     pool_arg.size(1), stride};
  }
  a.has_valid_lens =
      optional_input(valid_lens, f, "req_to_verify_expected_tokens_valid_lens", rpi, valid_arg, a.valid_lens);
  a.kv_token_id_vs_position_offset = kv_token_id_vs_position_offset;
  a.has_identities = optional_input(identities, f, "req_identities", rpi, identities_arg, a.identities);
  same_place(f, rpi, vp.slot_indices, "verify_plan");
  same_place(f, rpi, wp.write_offsets, "write_plan");
  same_place(f, rpi, st.input_error_bits, "status");
  same_place(f, rpi, ws.verify_offsets, "workspace");
  a.verify_slot_indices = as_vec<std::int64_t>(vp.slot_indices);
  a.verify_expected_tokens = as_vec<std::int64_t>(vp.expected_tokens);
  a.verify_expected_positions = as_vec<std::int64_t>(vp.expected_positions);
  a.verify_prev_slot_indices = as_vec<std::int64_t>(vp.prev_slot_indices);
  a.verify_num_valid = static_cast<std::int32_t*>(vp.num_valid.data());
  a.enable = static_cast<std::int32_t*>(vp.enable.data());
  a.write_offsets = as_vec<std::int64_t>(wp.write_offsets);
  a.write_seed_slot_indices = as_vec<std::int64_t>(wp.write_seed_slot_indices);
  a.write_num_valid_reqs = static_cast<std::int32_t*>(wp.write_num_valid_reqs.data());
  a.has_verify_identities = vp.has_identities;
  if (vp.has_identities) a.verify_identities = as_vec<std::int64_t>(vp.identities);
  a.has_write_identities = wp.has_identities;
  if (wp.has_identities) a.write_identities = as_vec<std::int64_t>(wp.identities);
  a.input_error_bits = static_cast<std::int32_t*>(st.input_error_bits.data());
  a.first_bad_row = static_cast<std::int32_t*>(st.first_bad_row.data());
  a.workspace = as_vec<std::int64_t>(ws.verify_offsets);
  a.algorithm = parse_algorithm(f, algorithm, true);
  const Place place = make_place(f, rpi.location, backend, stream);
  if (place.cuda) {
    kvcanary::python::plan(place, a);
  } else {
    nb::gil_scoped_release release;
    kvcanary::python::plan(place, a);
  }
}

void py_verify(const BoundVerifyPlan& vp, nb::list targets, const BoundRing& ring, bool check_expected_token,
               bool check_slot_zero, bool check_freed, const std::string& algorithm, nb::object backend, nb::object stream) {
  constexpr const char* f = "verify";
  VerifyArgs a;
  a.plan = VerifyPlanArgs{as_vec<const std::int64_t>(vp.slot_indices), as_vec<const std::int64_t>(vp.expected_tokens),
                          as_vec<const std::int64_t>(vp.expected_positions),
                          as_vec<const std::int64_t>(vp.prev_slot_indices),
                          static_cast<const std::int32_t*>(vp.num_valid.data()),
                          static_cast<const std::int32_t*>(vp.enable.data())};
  a.plan.has_identities = vp.has_identities;
  if (vp.has_identities) a.plan.identities = as_vec<const std::int64_t>(vp.identities);
  same_place(f, vp.slot_indices, ring.rows, "ring");
  a.targets = target_args(f, vp.slot_indices, targets);
  a.ring = ring.args;
  a.check_expected_token = check_expected_token;
  a.check_slot_zero = check_slot_zero;
  a.check_freed = check_freed;
  a.algorithm = parse_algorithm(f, algorithm, false);
  const Place place = make_place(f, vp.slot_indices.location, backend, stream);
  if (place.cuda) {
    kvcanary::python::verify(place, a);
  } else {
    nb::gil_scoped_release release;
    kvcanary::python::verify(place, a);
  }
}

void py_write(const BoundWritePlan& wp, nb::handle input_ids, nb::handle positions, nb::handle out_cache_loc,
              nb::handle expected_input_ids, nb::handle expected_positions, nb::handle chain_position_assert,
              nb::list targets, const BoundRing& ring, const std::string& algorithm, nb::object backend,
              nb::object stream) {
  constexpr const char* f = "write";
  WriteArgs a;
  const Arg ids = import_array(input_ids, f, "input_ids", false);
  // Token arrays: int64, or int32 widened as read (SPEC-CANARY §4); one dtype for all of them.
  const bool is32 = ids.dtype.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int) && ids.dtype.bits == 32;
  const DType index = is32 ? DType::Int32 : DType::Int64;
  check_vector(ids, index);
  const Arg pos = vector_arg(positions, f, "positions", index, false);
  const Arg loc = vector_arg(out_cache_loc, f, "out_cache_loc", index, false);
  const Arg flag = scalar_arg(chain_position_assert, f, "chain_position_assert", DType::Int32, false);
  for (const Arg* x : {&pos, &loc, &flag}) check_same_location(ids, *x);
  const std::int64_t n = ids.size(0);
  for (const Arg* x : {&pos, &loc})
    if (x->size(0) != n)
      value_error(f, x->name, "has " + std::to_string(x->size(0)) + " entries, input_ids has " + std::to_string(n));
  Arg eids, epos;
  if (expected_input_ids.is_none() != expected_positions.is_none())
    value_error(f, "expected_input_ids", "and expected_positions must be given both or neither");
  if (!expected_input_ids.is_none()) {
    eids = vector_arg(expected_input_ids, f, "expected_input_ids", index, false);
    epos = vector_arg(expected_positions, f, "expected_positions", index, false);
    for (const Arg* x : {&eids, &epos}) {
      check_same_location(ids, *x);
      if (x->size(0) != n)
        value_error(f, x->name, "has " + std::to_string(x->size(0)) + " entries, input_ids has " + std::to_string(n));
    }
    a.has_expected = true;
    a.expected_input_ids = Vec<const void>{eids.data(), n};
    a.expected_positions = Vec<const void>{epos.data(), n};
  }
  same_place(f, ids, wp.write_offsets, "write_plan");
  same_place(f, ids, ring.rows, "ring");
  a.targets = target_args(f, ids, targets);
  a.write_offsets = as_vec<const std::int64_t>(wp.write_offsets);
  a.write_seed_slot_indices = as_vec<const std::int64_t>(wp.write_seed_slot_indices);
  a.write_num_valid_reqs = static_cast<const std::int32_t*>(wp.write_num_valid_reqs.data());
  a.has_identities = wp.has_identities;
  if (wp.has_identities) a.write_identities = as_vec<const std::int64_t>(wp.identities);
  a.index_int32 = is32;
  a.input_ids = Vec<const void>{ids.data(), n};
  a.positions = Vec<const void>{pos.data(), n};
  a.out_cache_loc = Vec<const void>{loc.data(), n};
  a.chain_position_assert = static_cast<const std::int32_t*>(flag.data());
  a.ring = ring.args;
  a.algorithm = parse_algorithm(f, algorithm, false);
  const Place place = make_place(f, ids.location, backend, stream);
  if (place.cuda) {
    kvcanary::python::write(place, a);
  } else {
    nb::gil_scoped_release release;
    kvcanary::python::write(place, a);
  }
}

nb::dict py_read_report(const BoundRing& ring, std::int64_t already_reported, bool keep_never_written,
                        nb::object stream) {
  constexpr const char* f = "read_report";
  const Place place = make_place(f, ring.rows.location, nb::none(), stream);
  if (place.cuda && stream_is_capturing(place.stream, place.device_id))
    throw std::runtime_error("kvcanary.read_report: the stream is capturing a CUDA graph; read_report copies and "
                             "waits, so it runs between steps, never inside a capture");
  RingSnapshot snapshot;
  {
    nb::gil_scoped_release release;
    snapshot = read_ring(place, ring.args);
  }
  const Report r = make_report(snapshot, already_reported, keep_never_written);
  nb::dict d;
  d["rows"] = ring_rows(r.rows);
  d["lines"] = nb::cast(r.lines);
  d["count"] = r.count;
  d["capacity"] = r.capacity;
  d["overflowed"] = r.overflowed;
  d["lost_to_overflow"] = r.lost_to_overflow;
  d["first_row"] = r.first_row;
  d["rows_read"] = r.rows_read;
  d["dropped"] = r.dropped;
  d["slot_run_counter"] = r.slot_run_counter;
  d["kernel_run_counter"] = r.kernel_run_counter;
  d["summary"] = r.summary;
  return d;
}

}  // namespace
}  // namespace python
}  // namespace kvcanary

NB_MODULE(_core, m) {
  using namespace kvcanary::python;
  bind_canary(m);
  m.doc() = "kvcanary's extension: checks at the Python boundary, then Kokkos. Use the kvcanary package.";

  nb::class_<BoundVerifyPlan>(m, "VerifyPlanHandle")
      .def("__init__", [](BoundVerifyPlan* self, nb::handle a, nb::handle b, nb::handle c, nb::handle d, nb::handle e,
                          nb::handle g, nb::handle i) {
        new (self) BoundVerifyPlan(make_verify_plan(a, b, c, d, e, g, i));
      },
           "verify_slot_indices"_a.none(), "verify_expected_tokens"_a.none(), "verify_expected_positions"_a.none(),
           "verify_prev_slot_indices"_a.none(), "verify_num_valid"_a.none(), "enable"_a.none(),
           "verify_identities"_a.none())
      .def_prop_ro("capacity", &BoundVerifyPlan::capacity)
      .def_prop_ro("device", [](const BoundVerifyPlan& p) { return p.slot_indices.location.text(); });
  nb::class_<BoundWritePlan>(m, "WritePlanHandle")
      .def("__init__", [](BoundWritePlan* self, nb::handle a, nb::handle b, nb::handle c, nb::handle i) {
        new (self) BoundWritePlan(make_write_plan(a, b, c, i));
      }, "write_offsets"_a.none(), "write_seed_slot_indices"_a.none(), "write_num_valid_reqs"_a.none(),
         "write_identities"_a.none())
      .def_prop_ro("capacity", &BoundWritePlan::capacity);
  nb::class_<BoundStatus>(m, "PlanStatusHandle").def("__init__", [](BoundStatus* self, nb::handle a, nb::handle b) {
    new (self) BoundStatus(make_status(a, b));
  }, "input_error_bits"_a.none(), "first_bad_row"_a.none());
  nb::class_<BoundWorkspace>(m, "PlanWorkspaceHandle")
      .def("__init__", [](BoundWorkspace* self, nb::handle a) { new (self) BoundWorkspace(make_workspace(a)); },
           "verify_offsets"_a.none())
      .def_prop_ro("max_batch_size", [](const BoundWorkspace& w) { return w.verify_offsets.size(0) - 1; });
  nb::class_<BoundBuffer>(m, "CanaryBufferHandle")
      .def("__init__", [](BoundBuffer* self, nb::handle a) { new (self) BoundBuffer(make_buffer(a)); },
           "records"_a.none())
      .def_prop_ro("num_slots", [](const BoundBuffer& b) { return b.args.num_slots; })
      .def_prop_ro("stride_bytes", [](const BoundBuffer& b) { return b.args.stride_bytes; });
  nb::class_<BoundRing>(m, "ViolationRingHandle")
      .def("__init__", [](BoundRing* self, nb::handle a, nb::handle b, nb::handle c, nb::handle d) {
        new (self) BoundRing(make_ring(a, b, c, d));
      }, "rows"_a.none(), "count"_a.none(), "slot_run_counter"_a.none(), "kernel_run_counter"_a.none())
      .def_prop_ro("capacity", [](const BoundRing& r) { return r.args.capacity; });
  nb::class_<BoundRealKv>(m, "RealKvHandle").def("__init__", [](BoundRealKv* self, int mode, nb::list sources) {
    new (self) BoundRealKv(make_real_kv(mode, sources));
  });

  // Every handle may arrive as None (nanobind refuses None unless told): the checks name what is missing.
  m.def("plan", &py_plan, "req_pool_indices"_a.none(), "prefix_lens"_a.none(), "extend_seq_lens"_a.none(),
        "req_to_token"_a.none(), "verify_plan"_a, "write_plan"_a, "status"_a, "workspace"_a, "swa_window_size"_a,
        "full_to_swa_index_mapping"_a.none(), "req_to_verify_expected_tokens"_a.none(),
        "req_to_verify_expected_tokens_valid_lens"_a.none(), "kv_token_id_vs_position_offset"_a,
        "req_identities"_a.none(), "algorithm"_a,
        "backend"_a.none(), "stream"_a.none());
  m.def("verify", &py_verify, "verify_plan"_a, "targets"_a, "ring"_a, "check_expected_token"_a, "check_slot_zero"_a,
        "check_freed"_a, "algorithm"_a, "backend"_a.none(), "stream"_a.none());
  m.def("write", &py_write, "write_plan"_a, "input_ids"_a.none(), "positions"_a.none(), "out_cache_loc"_a.none(),
        "expected_input_ids"_a.none(), "expected_positions"_a.none(), "chain_position_assert"_a.none(), "targets"_a,
        "ring"_a, "algorithm"_a, "backend"_a.none(), "stream"_a.none());
  m.def("read_report", &py_read_report, "ring"_a, "already_reported"_a, "keep_never_written"_a, "stream"_a.none());
  m.def("format_row", [](std::vector<std::int64_t> row) {
    if (row.size() != 8) throw nb::value_error("kvcanary.format_row: a ring row has 8 fields");
    return format_row(row.data());
  });

  m.def("initialize", [](int device_id, int num_threads) { initialize(InitOptions{device_id, num_threads}); },
        "device_id"_a = -1, "num_threads"_a = -1);
  m.def("finalize", &finalize);
  m.def("is_initialized", &is_initialized);
  m.def("is_finalized", &is_finalized);
  m.def("backends", &backends);
  m.def("built_with_cuda", &built_with_cuda);
  m.def("kokkos_version", &kokkos_version);
  m.def("initialized_device", &initialized_device);
  m.def("stream_is_capturing", &stream_is_capturing);
  // For the tests: whether an object is described through its type's DLPack C exchange table.
  m.def("array_import_route", [](nb::handle h, bool writable) {
    ExchangedArray unused;
    return exchange_describe(h, writable, unused) ? "exchange" : "dlpack_or_buffer";
  }, "array"_a, "writable"_a);
  m.def("prepare_stream", &prepare_stream);
}
