// The outcomes SPEC-CANARY §4 leaves open in a write call (write_outcomes.hpp): the open parts found from
// the call's offsets, seeds and slots; a result checked against every allowed assignment of the open seed
// reads, each request walked by reference::write_request().

#include <kvcanary/tools/write_outcomes.hpp>

#include <kvcanary/impl/hash.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace kvcanary {
namespace reference {

namespace {

// The requests of a call and the slots each stores to, in token order (SPEC-CANARY §4: the range
// [offsets[r], offsets[r+1]) up to its first index outside the tokens; slots in [0, num_slots) store).
struct CallShape {
  std::vector<std::int64_t> seeds;               // per request; -1 when the request stores nothing or has no seed in range
  std::vector<std::vector<std::int64_t>> stores;  // per request
};

CallShape shape_of(const Outputs& plan, const StepTokens& tokens, std::int64_t num_slots) {
  CallShape shape;
  const auto capacity = static_cast<std::int64_t>(plan.write_seed_slot_indices.size());
  // A call write() rejects has no outcome: nothing is open (and nothing is read past an array).
  if (plan.write_offsets.size() != plan.write_seed_slot_indices.size() + 1 ||
      tokens.out_cache_loc.size() != tokens.input_ids.size())
    return shape;
  const std::int64_t reqs = std::clamp<std::int64_t>(plan.write_num_valid_reqs, 0, capacity);
  const auto num_tokens = static_cast<std::int64_t>(tokens.input_ids.size());
  for (std::int64_t r = 0; r < reqs; ++r) {
    const std::int64_t first = plan.write_offsets[static_cast<std::size_t>(r)];
    const std::int64_t last = plan.write_offsets[static_cast<std::size_t>(r + 1)];
    const std::int64_t seed = plan.write_seed_slot_indices[static_cast<std::size_t>(r)];
    shape.seeds.push_back(first < last && seed >= 0 && seed < num_slots ? seed : -1);
    shape.stores.emplace_back();
    for (std::int64_t i = first; i < last && i >= 0 && i < num_tokens; ++i) {
      const std::int64_t slot = tokens.out_cache_loc[static_cast<std::size_t>(i)];
      if (slot >= 0 && slot < num_slots) shape.stores.back().push_back(slot);
    }
  }
  return shape;
}

// Where a field of a seed read comes from: the record before the call (request -1), or store `index` of
// request `request`.
struct Source {
  std::int64_t request = -1, index = -1;
};

struct Walk {
  std::vector<RingRow> rows;
  std::vector<std::pair<std::int64_t, Record>> stores;
  std::int64_t stored = 0;
};

std::int64_t field(const Record& record, int f) {
  return f == 0 ? record.token : f == 1 ? record.position : f == 2 ? record.prev_hash : record.real_kv_hash;
}

}  // namespace

OpenWrites open_writes(const Outputs& plan, const StepTokens& tokens, std::int64_t num_slots) {
  const CallShape shape = shape_of(plan, tokens, num_slots);
  std::map<std::int64_t, std::vector<std::int64_t>> storers;  // slot → the request of each store
  for (std::size_t r = 0; r < shape.stores.size(); ++r)
    for (const std::int64_t slot : shape.stores[r]) storers[slot].push_back(static_cast<std::int64_t>(r));
  OpenWrites open;
  for (const auto& [slot, requests] : storers)
    if (requests.size() > 1) open.shared_slots.push_back(slot);
  for (std::size_t r = 0; r < shape.seeds.size(); ++r) {
    const auto it = storers.find(shape.seeds[r]);
    if (shape.seeds[r] >= 0 && it != storers.end() &&
        std::any_of(it->second.begin(), it->second.end(), [&](std::int64_t q) { return q != static_cast<std::int64_t>(r); }))
      open.contested_seeds.push_back(static_cast<std::int64_t>(r));
  }
  return open;
}

WriteOutcomeCheck check_write_outcome(const Outputs& plan, const StepTokens& tokens, KernelKind kernel_kind,
                                      const RealKv& real_kv, const CanaryBuffer& buffer_before,
                                      const ViolationRing& ring_before, const CanaryBuffer& buffer_after,
                                      const ViolationRing& ring_after, std::int64_t max_outcomes) {
  // The serial outcome first: it checks the call as write() does (std::invalid_argument) and gives the
  // counters, which no open choice changes.
  CanaryBuffer serial_buffer = buffer_before;
  ViolationRing serial_ring = ring_before;
  write(plan, tokens, kernel_kind, real_kv, serial_buffer, serial_ring);
  WriteOutcomeCheck check;
  if (ring_after.capacity != serial_ring.capacity || ring_after.slot_run_counter != serial_ring.slot_run_counter ||
      ring_after.kernel_run_counter != serial_ring.kernel_run_counter || buffer_after.size() != buffer_before.size())
    return check;
  const auto num_slots = static_cast<std::int64_t>(buffer_before.size());
  const CallShape shape = shape_of(plan, tokens, num_slots);
  const auto requests = static_cast<std::int64_t>(shape.seeds.size());
  const auto at = [](auto& values, std::int64_t i) -> auto& { return values[static_cast<std::size_t>(i)]; };

  // The sources each contested seed read may take (empty: not contested), and the components of "may read
  // from": requests that no read links are decided apart, one component at a time.
  std::vector<std::vector<Source>> sources(static_cast<std::size_t>(requests));
  std::vector<std::int64_t> parent(static_cast<std::size_t>(requests));
  for (std::int64_t r = 0; r < requests; ++r) at(parent, r) = r;
  const std::function<std::int64_t(std::int64_t)> root = [&](std::int64_t r) {
    return at(parent, r) == r ? r : at(parent, r) = root(at(parent, r));
  };
  for (std::int64_t r = 0; r < requests; ++r) {
    const std::int64_t seed = at(shape.seeds, r);
    if (seed < 0) continue;
    std::vector<Source> from{Source{}};
    for (std::int64_t q = 0; q < requests; ++q) {
      const auto& stores = at(shape.stores, q);
      for (std::size_t k = 0; k < stores.size(); ++k)
        if (q != r && stores[k] == seed) {
          from.push_back(Source{q, static_cast<std::int64_t>(k)});
          at(parent, root(q)) = root(r);
        }
    }
    if (from.size() > 1) at(sources, r) = std::move(from);
  }
  std::map<std::int64_t, std::vector<std::int64_t>> components;  // root → its requests, ascending
  for (std::int64_t r = 0; r < requests; ++r) components[root(r)].push_back(r);
  std::map<std::int64_t, std::set<std::int64_t>> storers;  // slot → the components storing it
  for (std::int64_t r = 0; r < requests; ++r)
    for (const std::int64_t slot : at(shape.stores, r)) storers[slot].insert(root(r));

  const bool overflowed = Impl::as_uint64(ring_after.count) > Impl::as_uint64(ring_after.capacity);
  std::multiset<RingRow> unclaimed(ring_after.rows.begin(), ring_after.rows.end());  // library rows not yet explained
  std::vector<Walk> walks(static_cast<std::size_t>(requests));
  std::vector<int> state(static_cast<std::size_t>(requests));  // 0 not walked, 1 walking, 2 walked
  std::vector<std::array<std::size_t, 3>> choice(static_cast<std::size_t>(requests), {0, 0, 0});
  // Walks request r after the requests its seed read reads from (a read cannot see a store that follows
  // it: a cycle of reads is no outcome); false on a cycle.
  const std::function<bool(std::int64_t)> walk = [&](std::int64_t r) {
    int& s = at(state, r);
    if (s != 0) return s == 2;
    s = 1;
    const std::int64_t seed = at(shape.seeds, r);
    Record view = seed >= 0 ? at(buffer_before, seed) : Record{};
    std::int64_t fields[3] = {view.token, view.position, view.prev_hash};
    for (int f = 0; f < 3 && !at(sources, r).empty(); ++f) {
      const Source& from = at(sources, r)[at(choice, r)[static_cast<std::size_t>(f)]];
      if (from.request < 0) continue;
      if (!walk(from.request)) return false;
      fields[f] = field(at(at(walks, from.request).stores, from.index).second, f);
    }
    view.token = fields[0];
    view.position = fields[1];
    view.prev_hash = fields[2];
    Walk& w = at(walks, r);
    ViolationRing rows;
    rows.capacity = std::numeric_limits<std::int64_t>::max();
    w.stores.clear();
    w.stored = write_request(plan, tokens, kernel_kind, real_kv, num_slots, r, view, rows,
                             [&](std::int64_t slot, const Record& record) { w.stores.emplace_back(slot, record); });
    w.rows = std::move(rows.rows);
    s = 2;
    return true;
  };
  // The library's record at `slot` against the records stored there (per field, one of them).
  const auto slot_allowed = [&](std::int64_t slot, const std::vector<Record>& stored) {
    for (int f = 0; f < 4; ++f)
      if (std::none_of(stored.begin(), stored.end(),
                       [&](const Record& record) { return field(record, f) == field(at(buffer_after, slot), f); }))
        return false;
    return true;
  };

  std::int64_t count = ring_before.count;
  for (const auto& [component_root, members] : components) {
    std::vector<std::int64_t> contested;
    for (const std::int64_t r : members)
      if (!at(sources, r).empty()) contested.push_back(r);
    bool found = false;
    for (bool more = true; more && !found;) {
      if (check.outcomes_tried == max_outcomes) {
        check.exhausted = true;
        return check;
      }
      ++check.outcomes_tried;
      for (const std::int64_t r : members) at(state, r) = 0;
      bool fits = std::all_of(members.begin(), members.end(), walk);
      // The slots only this component stores, and its rows among the library's.
      std::map<std::int64_t, std::vector<Record>> stored;
      std::multiset<RingRow> left = unclaimed;
      for (std::size_t m = 0; m < members.size() && fits; ++m) {
        const Walk& w = at(walks, members[m]);
        for (const auto& [slot, record] : w.stores)
          if (storers[slot].size() == 1) stored[slot].push_back(record);
        for (const RingRow& row : w.rows) {
          const auto it = left.find(row);
          if (it != left.end())
            left.erase(it);
          else
            fits = overflowed;  // a full ring may have dropped it
        }
      }
      for (auto it = stored.begin(); it != stored.end() && fits; ++it) fits = slot_allowed(it->first, it->second);
      if (fits) {
        found = true;
        unclaimed = std::move(left);
        for (const std::int64_t r : members) count = Impl::as_int64(Impl::as_uint64(count) + at(walks, r).rows.size());
        break;
      }
      // The next assignment (an odometer over every field of every contested read of the component).
      more = false;
      for (std::size_t c = 0; c < contested.size() && !more; ++c)
        for (std::size_t f = 0; f < 3 && !more; ++f) {
          auto& digit = at(choice, contested[c])[f];
          more = ++digit < at(sources, contested[c]).size();
          if (!more) digit = 0;
        }
    }
    if (!found) return check;
  }
  // What is left: the rows from before the call, the count, the slots several components store, the rest.
  if (Impl::as_uint64(count) != Impl::as_uint64(ring_after.count)) return check;
  if (!overflowed && unclaimed != std::multiset<RingRow>(ring_before.rows.begin(), ring_before.rows.end())) return check;
  std::map<std::int64_t, std::vector<Record>> stored;
  for (const Walk& w : walks)
    for (const auto& [slot, record] : w.stores) stored[slot].push_back(record);
  for (std::int64_t slot = 0; slot < num_slots; ++slot) {
    const auto it = stored.find(slot);
    if (it == stored.end() ? !(at(buffer_after, slot) == at(buffer_before, slot)) : !slot_allowed(slot, it->second))
      return check;
  }
  check.allowed = true;
  return check;
}

}  // namespace reference
}  // namespace kvcanary
