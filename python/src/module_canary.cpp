// kvcanary.Canary's boundary: the bound batch objects (ForwardTokens, ForwardBatch, CachedPrefixes: arrays
// checked once and held, so a step call imports nothing), the Canary handle and its report as a dict. The
// Python layer (kvcanary/_canary.py) has checked the config's types; every array rule is checked here.

#include "core_canary.hpp"
#include "module_arrays.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace kvcanary {
namespace python {
namespace {

struct BoundTokens {
  Arg input_ids, positions, out_cache_loc, expected_input_ids, expected_positions;
  TokensArgs args;
};

struct BoundBatch {
  Arg req_pool_indices, prefix_lens, extend_seq_lens, valid_lens, identities;
  std::array<nb::object, kCanaryGroups> tokens;  // the BoundTokens, held
  BatchArgs args;
  Location where;
};

struct BoundCached {
  Arg pool_rows, lengths, valid_lens, identities;
  CachedArgs args;
  Location where;
};

struct BoundCanary {
  std::unique_ptr<CanaryHandle> canary;
  std::vector<Arg> tables;
  std::vector<nb::object> groups;  // the bound buffers and real-KV sources, held
  Location where;
};

// 1-D int64 vectors of one length and one place; returns the length.
std::int64_t same_vectors(const char* f, const Arg& first, std::initializer_list<const Arg*> others) {
  const std::int64_t n = first.size(0);
  for (const Arg* a : others) {
    check_same_location(first, *a);
    if (a->size(0) != n)
      value_error(f, a->name, "has " + std::to_string(a->size(0)) + " entries, " + first.name + " has " +
                                  std::to_string(n) + "; they must have one length");
  }
  return n;
}

// expected_tokens_valid_lens or identities, when given: an int64 vector like `first`, imported into `arg`
// and `vec`.
bool optional_vector(const char* f, const char* name, nb::handle h, const Arg& first, Arg& arg,
                     Vec<const std::int64_t>& vec) {
  if (h.is_none()) return false;
  arg = vector_arg(h, f, name, DType::Int64, false);
  same_vectors(f, first, {&arg});
  vec = as_vec<const std::int64_t>(arg);
  return true;
}

BoundTokens make_tokens(nb::handle input_ids, nb::handle positions, nb::handle out_cache_loc,
                        nb::handle expected_input_ids, nb::handle expected_positions) {
  constexpr const char* f = "ForwardTokens";
  BoundTokens t;
  t.input_ids = vector_arg(input_ids, f, "input_ids", DType::Int64, false);
  t.positions = vector_arg(positions, f, "positions", DType::Int64, false);
  t.out_cache_loc = vector_arg(out_cache_loc, f, "out_cache_loc", DType::Int64, false);
  same_vectors(f, t.input_ids, {&t.positions, &t.out_cache_loc});
  if (expected_input_ids.is_none() != expected_positions.is_none())
    value_error(f, "expected_input_ids", "and expected_positions must be given both or neither");
  if (!expected_input_ids.is_none()) {
    t.expected_input_ids = vector_arg(expected_input_ids, f, "expected_input_ids", DType::Int64, false);
    t.expected_positions = vector_arg(expected_positions, f, "expected_positions", DType::Int64, false);
    same_vectors(f, t.input_ids, {&t.expected_input_ids, &t.expected_positions});
    t.args.has_expected = true;
    t.args.expected_input_ids = as_vec<const std::int64_t>(t.expected_input_ids);
    t.args.expected_positions = as_vec<const std::int64_t>(t.expected_positions);
  }
  t.args.input_ids = as_vec<const std::int64_t>(t.input_ids);
  t.args.positions = as_vec<const std::int64_t>(t.positions);
  t.args.out_cache_loc = as_vec<const std::int64_t>(t.out_cache_loc);
  return t;
}

BoundBatch make_batch(nb::handle req_pool_indices, nb::handle prefix_lens, nb::handle extend_seq_lens,
                      nb::object tokens, nb::object swa_tokens, nb::object draft_tokens, nb::handle valid_lens,
                      nb::handle identities) {
  constexpr const char* f = "ForwardBatch";
  BoundBatch b;
  b.req_pool_indices = vector_arg(req_pool_indices, f, "req_pool_indices", DType::Int64, false);
  b.prefix_lens = vector_arg(prefix_lens, f, "prefix_lens", DType::Int64, false);
  b.extend_seq_lens = vector_arg(extend_seq_lens, f, "extend_seq_lens", DType::Int64, false);
  same_vectors(f, b.req_pool_indices, {&b.prefix_lens, &b.extend_seq_lens});
  b.args.has_valid_lens =
      optional_vector(f, "expected_tokens_valid_lens", valid_lens, b.req_pool_indices, b.valid_lens, b.args.valid_lens);
  b.args.has_identities =
      optional_vector(f, "identities", identities, b.req_pool_indices, b.identities, b.args.identities);
  b.args.req_pool_indices = as_vec<const std::int64_t>(b.req_pool_indices);
  b.args.prefix_lens = as_vec<const std::int64_t>(b.prefix_lens);
  b.args.extend_seq_lens = as_vec<const std::int64_t>(b.extend_seq_lens);
  const nb::object given[kCanaryGroups] = {tokens, swa_tokens, draft_tokens};
  static const char* const names[kCanaryGroups] = {"tokens", "swa_tokens", "draft_tokens"};
  for (int g = 0; g < kCanaryGroups; ++g) {
    if (given[g].is_none()) {
      if (g == 0) value_error(f, "tokens", "is required (a kvcanary.ForwardTokens)");
      continue;
    }
    const BoundTokens& t = nb::cast<const BoundTokens&>(given[g]);
    if (!(t.input_ids.location == b.req_pool_indices.location))
      value_error(f, names[g], "is on " + t.input_ids.location.text() + " but req_pool_indices is on " +
                                   b.req_pool_indices.location.text());
    b.tokens[g] = given[g];
    b.args.has_tokens[g] = true;
    b.args.tokens[g] = t.args;
  }
  b.where = b.req_pool_indices.location;
  return b;
}

BoundCached make_cached(nb::handle pool_rows, nb::handle lengths, nb::handle valid_lens, nb::handle identities) {
  constexpr const char* f = "CachedPrefixes";
  BoundCached c;
  c.pool_rows = vector_arg(pool_rows, f, "pool_rows", DType::Int64, false);
  c.lengths = vector_arg(lengths, f, "lengths", DType::Int64, false);
  same_vectors(f, c.pool_rows, {&c.lengths});
  c.args.has_valid_lens =
      optional_vector(f, "expected_tokens_valid_lens", valid_lens, c.pool_rows, c.valid_lens, c.args.valid_lens);
  c.args.has_identities = optional_vector(f, "identities", identities, c.pool_rows, c.identities, c.args.identities);
  c.args.pool_rows = as_vec<const std::int64_t>(c.pool_rows);
  c.args.lengths = as_vec<const std::int64_t>(c.lengths);
  c.where = c.pool_rows.location;
  return c;
}

template <class T>
T field(const nb::dict& config, const char* key) {
  if (!config.contains(key)) value_error("Canary", std::string("config.") + key, "is missing");
  return nb::cast<T>(config[key]);
}

CanaryConfigArgs config_args(const nb::dict& d, nb::object sink) {
  CanaryConfigArgs c;
  for_each_config_field(c, [&](const char* key, auto& value) {
    if (!d.contains(key)) value_error("Canary", std::string("config.") + key, "is missing");
    value = nb::cast<std::decay_t<decltype(value)>>(d[key]);
  });
  if (!sink.is_none())
    c.sink = [sink](const std::string& line) {
      nb::gil_scoped_acquire gil;
      sink(line);
    };
  return c;
}

nb::dict config_dict(CanaryConfigArgs c) {
  nb::dict d;
  for_each_config_field(c, [&](const char* key, const auto& value) { d[key] = value; });
  return d;
}

// (real_kv_k, real_kv_v, k, v): RealKvHandle / CanaryBufferHandle or None each.
GroupArgs group_args(BoundCanary& c, const Arg& first, nb::handle group, const char* name) {
  constexpr const char* f = "Canary";
  GroupArgs g;
  if (group.is_none()) return g;
  nb::tuple t = nb::cast<nb::tuple>(group);
  if (nb::len(t) != 4) value_error(f, name, "must be (real_kv_k, real_kv_v, k, v)");
  for (int half = 0; half < 2; ++half) {
    if (t[half].is_none()) continue;
    const BoundRealKv& kv = nb::cast<const BoundRealKv&>(t[half]);
    for (const Arg& a : kv.arrays)
      if (!(a.location == first.location))
        value_error(f, name, std::string(half ? "real_kv_v" : "real_kv_k") + " sources are on " +
                                 a.location.text() + " but req_to_token is on " + first.location.text());
    (half ? g.real_kv_v : g.real_kv_k) = kv.args.sources;
    c.groups.push_back(nb::borrow(t[half]));
  }
  for (int half = 0; half < 2; ++half) {
    if (t[2 + half].is_none()) continue;
    const BoundBuffer& b = nb::cast<const BoundBuffer&>(t[2 + half]);
    if (!(b.bytes.location == first.location))
      value_error(f, name, std::string(half ? "v" : "k") + " records are on " + b.bytes.location.text() +
                               " but req_to_token is on " + first.location.text());
    (half ? g.has_v : g.has_k) = true;
    (half ? g.v : g.k) = b.args;
    c.groups.push_back(nb::borrow(t[2 + half]));
  }
  return g;
}

void make_canary(BoundCanary* self, const nb::dict& config, nb::object sink, nb::handle req_to_token,
                 nb::handle expected_tokens, nb::handle lut, nb::handle target, nb::handle swa, nb::handle draft,
                 nb::object device, nb::object backend, nb::object stream) {
  constexpr const char* f = "Canary";
  BoundCanary c;
  CanaryTablesArgs t;
  Arg rtt = import_array(req_to_token, f, "req_to_token", false);
  const std::int64_t stride = check_matrix(rtt, DType::Int32);
  t.req_to_token = Mat<const std::int32_t>{static_cast<const std::int32_t*>(rtt.data()), rtt.size(0), rtt.size(1), stride};
  if (!device.is_none()) {
    const std::string want = nb::cast<std::string>(device);
    const std::string have = rtt.location.text();
    if (want != have && !(want == "cuda" && rtt.location.cuda))
      value_error(f, "device", "is '" + want + "' but req_to_token is on " + have +
                                   " (the Canary runs where the engine's tables live)");
  }
  if (!expected_tokens.is_none()) {
    Arg pool = import_array(expected_tokens, f, "req_to_verify_expected_tokens", false);
    const std::int64_t pool_stride = check_matrix(pool, DType::Int32);
    check_same_location(rtt, pool);
    t.has_expected_tokens = true;
    t.expected_tokens = Mat<const std::int32_t>{static_cast<const std::int32_t*>(pool.data()), pool.size(0),
                                                pool.size(1), pool_stride};
    c.tables.push_back(pool);
  }
  if (!lut.is_none()) {
    Arg l = vector_arg(lut, f, "full_to_swa_index_mapping", DType::Int64, false);
    check_same_location(rtt, l);
    t.has_lut = true;
    t.lut = as_vec<const std::int64_t>(l);
    c.tables.push_back(l);
  }
  t.groups[0] = group_args(c, rtt, target, "target");
  t.groups[1] = group_args(c, rtt, swa, "swa");
  t.groups[2] = group_args(c, rtt, draft, "draft");
  const Place place = make_place(f, rtt.location, backend, stream);
  c.where = rtt.location;
  c.tables.push_back(rtt);
  const CanaryConfigArgs args = config_args(config, sink);
  c.canary = std::make_unique<CanaryHandle>(place, args, t);
  new (self) BoundCanary(std::move(c));
}

void same_canary_place(const char* function, const BoundCanary& c, const Location& where, const char* name) {
  if (!(where == c.where))
    value_error(function, name, "is on " + where.text() + " but the Canary runs on " + c.where.text());
}

template <class Call>
void pass(const BoundCanary& c, Call&& call) {
  if (c.where.cuda) {
    call();
  } else {
    nb::gil_scoped_release release;
    call();
  }
}

const char* const kGroupNames[kCanaryGroups] = {"target", "swa", "draft"};

// kvcanary.RuntimeReport's fields, in order (a tuple: the cheapest object to build every step).
nb::tuple report_tuple(const CanaryReport& r) {
  const auto names = [](const std::vector<int>& groups) {
    nb::list out;
    for (const int g : groups) out.append(kGroupNames[g]);
    return out;
  };
  const Report& v = r.violations;
  return nb::make_tuple(r.step, ring_rows(v.rows), nb::cast(v.lines), names(r.row_groups),
                        names(r.overflowed_groups), nb::cast(r.warnings), nb::cast(r.health_errors),
                        nb::cast(r.info), v.count, v.capacity, v.overflowed, v.lost_to_overflow, v.newly_lost,
                        v.rows_read, v.dropped, nb::cast(v.dropped_launch_tags), v.slot_run_counter,
                        v.kernel_run_counter, v.summary);
}

}  // namespace

void bind_canary(nb::module_& m) {
  nb::exception<ViolationRaised>(m, "ViolationRaised", PyExc_RuntimeError);
  nb::exception<NotRunningRaised>(m, "NotRunningRaised", PyExc_RuntimeError);

  nb::class_<BoundTokens>(m, "ForwardTokensHandle")
      .def("__init__", [](BoundTokens* self, nb::handle a, nb::handle b, nb::handle c, nb::handle d, nb::handle e) {
        new (self) BoundTokens(make_tokens(a, b, c, d, e));
      }, "input_ids"_a.none(), "positions"_a.none(), "out_cache_loc"_a.none(), "expected_input_ids"_a.none(),
         "expected_positions"_a.none())
      .def_prop_ro("size", [](const BoundTokens& t) { return t.args.input_ids.size; });
  nb::class_<BoundBatch>(m, "ForwardBatchHandle")
      .def("__init__", [](BoundBatch* self, nb::handle a, nb::handle b, nb::handle c, nb::object tokens,
                          nb::object swa, nb::object draft, nb::handle valid, nb::handle identities) {
        new (self) BoundBatch(make_batch(a, b, c, tokens, swa, draft, valid, identities));
      }, "req_pool_indices"_a.none(), "prefix_lens"_a.none(), "extend_seq_lens"_a.none(), "tokens"_a.none(),
         "swa_tokens"_a.none(), "draft_tokens"_a.none(), "expected_tokens_valid_lens"_a.none(),
         "identities"_a.none())
      .def_prop_ro("batch_size", [](const BoundBatch& b) { return b.args.req_pool_indices.size; });
  nb::class_<BoundCached>(m, "CachedPrefixesHandle")
      .def("__init__", [](BoundCached* self, nb::handle a, nb::handle b, nb::handle c, nb::handle identities) {
        new (self) BoundCached(make_cached(a, b, c, identities));
      }, "pool_rows"_a.none(), "lengths"_a.none(), "expected_tokens_valid_lens"_a.none(), "identities"_a.none());

  nb::class_<BoundCanary>(m, "CanaryHandle")
      .def("__init__", &make_canary, "config"_a, "sink"_a.none(), "req_to_token"_a.none(),
           "req_to_verify_expected_tokens"_a.none(), "full_to_swa_index_mapping"_a.none(), "target"_a.none(),
           "swa"_a.none(), "draft"_a.none(), "device"_a.none(), "backend"_a.none(), "stream"_a.none())
      .def("before_forward", [](BoundCanary& c, const BoundBatch& b) {
        same_canary_place("Canary.before_forward", c, b.where, "batch");
        pass(c, [&] { c.canary->before_forward(b.args); });
      })
      .def("after_forward", [](BoundCanary& c, const BoundBatch& b) {
        same_canary_place("Canary.after_forward", c, b.where, "batch");
        pass(c, [&] { c.canary->after_forward(b.args); });
      })
      .def("sweep", [](BoundCanary& c, const BoundCached& p) {
        same_canary_place("Canary.sweep", c, p.where, "cached");
        pass(c, [&] { c.canary->sweep(p.args); });
      })
      // The report calls keep the GIL: the sink is Python.
      .def("end_step", [](BoundCanary& c, std::int64_t forwards) { return report_tuple(c.canary->end_step(forwards)); })
      .def("flush", [](BoundCanary& c) { return report_tuple(c.canary->flush()); })
      .def("rearm", [](BoundCanary& c) { return report_tuple(c.canary->rearm()); })
      .def("last_report", [](const BoundCanary& c) { return report_tuple(c.canary->last_report()); })
      .def("set_chain_position_assert", [](BoundCanary& c, bool on) { c.canary->set_chain_position_assert(on); })
      .def_prop_ro("steps", [](const BoundCanary& c) { return c.canary->steps(); })
      .def_prop_ro("sweeps", [](const BoundCanary& c) { return c.canary->sweeps(); })
      .def_prop_ro("capacities", [](const BoundCanary& c) { return c.canary->capacities(); })
      .def("group_on", [](const BoundCanary& c, int g) { return c.canary->group_on(g); })
      .def_prop_ro("device", [](const BoundCanary& c) { return c.where.text(); });

  m.def("canary_config_defaults", [] { return config_dict(default_canary_config()); });
}

}  // namespace python
}  // namespace kvcanary
