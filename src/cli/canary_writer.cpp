#include "canary_writer.hpp"

#include "json_writer.hpp"

#include <kvcanary/stages/report.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace kvcanary {
namespace cli {

namespace {

template <std::size_t N>
void write_row(std::ostream& out, const std::array<std::int64_t, N>& row) {
  out << '[';
  for (std::size_t f = 0; f < N; ++f) {
    if (f > 0) out << ',';
    write_number(out, row[f]);
  }
  out << ']';
}

}  // namespace

void sort_ring_rows(reference::ViolationRing& ring) { std::sort(ring.rows.begin(), ring.rows.end()); }

void write_canary_members(std::ostream& out, const reference::CanaryBuffer& buffer,
                          const reference::ViolationRing& ring) {
  std::int64_t dropped = 0;
  Members members(out);
  members
      .member("canary_buffer",
              [&](std::ostream& o) {
                o << '[';
                for (std::size_t s = 0; s < buffer.size(); ++s) {
                  if (s > 0) o << ',';
                  const reference::Record& r = buffer[s];
                  write_row<4>(o, {r.token, r.position, r.prev_hash, r.real_kv_hash});
                }
                o << ']';
              })
      .member("ring",
              [&](std::ostream& o) {
                o << '{';
                Members(o)
                    .scalar("count", ring.count)
                    .scalar("capacity", ring.capacity)
                    .member("rows", [&](std::ostream& rows) {
                      rows << '[';
                      for (std::size_t i = 0; i < ring.rows.size(); ++i) {
                        if (i > 0) rows << ',';
                        write_row(rows, ring.rows[i]);
                      }
                      rows << ']';
                    });
                o << '}';
              })
      .scalar("slot_run_counter", ring.slot_run_counter)
      .scalar("kernel_run_counter", ring.kernel_run_counter)
      .member("report",
              [&](std::ostream& o) {
                o << '[';
                bool first = true;
                for (const RingRow& row : ring.rows) {
                  if (is_never_written(row)) {
                    ++dropped;
                    continue;
                  }
                  o << (first ? "" : ",") << nlohmann::json(format_violation(row)).dump();
                  first = false;
                }
                o << ']';
              });
  members.scalar("report_dropped", dropped);  // counted while the report was written
}

}  // namespace cli
}  // namespace kvcanary
