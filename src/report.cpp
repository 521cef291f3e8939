// The host report of SPEC-CANARY §7 (see report.hpp).

#include <kvcanary/stages/report.hpp>

#include <kvcanary/impl/hash.hpp>
#include <kvcanary/stages/plan_shape_checks.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <utility>

namespace kvcanary {

namespace {

// §7's names of fail_reason_bits 1, 2, 4, ..., 64, then §11's 128 ... 1024.
constexpr const char* kReasonNames[] = {"verify_chain_hash", "verify_position",  "verify_real_kv_hash", "write_token",
                                        "write_position",    "verify_token",     "out_of_range",        "verify_freed",
                                        "verify_slot_zero",  "metadata_mismatch", "padding_slot_kv"};
// §11.1: rows of these bits never describe a never-written record, whatever their fields hold.
constexpr std::int64_t kV2Bits = kVerifyFreed | kVerifySlotZero | kMetadataMismatch | kPaddingSlotKv;
constexpr int kNamedReasons = sizeof(kReasonNames) / sizeof(kReasonNames[0]);

std::string hex64(std::int64_t value) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016" PRIx64, Impl::as_uint64(value));
  return text;
}

void append_json_string(std::string& out, const std::string& text) {
  out += '"';
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      char escaped[7];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(byte));
      out += escaped;
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

std::string fail_reason_names(std::int64_t bits) {
  const std::uint64_t value = Impl::as_uint64(bits);
  if (value == 0) return "none";
  std::string names;
  for (int bit = 0; bit < 64; ++bit) {
    if ((value >> bit & 1u) == 0) continue;
    if (!names.empty()) names += '+';
    names += bit < kNamedReasons ? std::string(kReasonNames[bit]) : "bit" + std::to_string(bit);
  }
  return names;
}

std::string format_violation(const RingRow& row) {
  std::string line = "kv_canary violation: launch_tag=";
  line += kernel_kind_name(row[kRowKernelKind]);
  line += " fail_reason=" + fail_reason_names(row[kRowFailReasonBits]);
  line += " slot_idx=" + std::to_string(row[kRowSlot]);
  line += " position=" + std::to_string(row[kRowPosition]);
  line += " stored_token=" + std::to_string(row[kRowStoredToken]);
  line += " expected_token=" + std::to_string(row[kRowExpectedToken]);
  line += " stored_chain_hash=" + hex64(row[kRowStoredChainHash]);
  line += " expected_aux=" + hex64(row[kRowExpectedAux]);
  return line;
}

bool is_never_written(const RingRow& row) {
  constexpr std::int64_t kStoreOrIndexBits = kWriteToken | kWritePosition | kOutOfRange | kV2Bits;
  return row[kRowStoredToken] == 0 && row[kRowPosition] == 0 && row[kRowStoredChainHash] == 0 &&
         (row[kRowFailReasonBits] & kStoreOrIndexBits) == 0;
}

void Impl::note_dropped_row(ViolationReport& report, const RingRow& row) {
  ++report.dropped;
  auto& tags = report.dropped_launch_tags;
  const auto at = std::lower_bound(tags.begin(), tags.end(), row[kRowKernelKind]);
  if (at == tags.end() || *at != row[kRowKernelKind]) tags.insert(at, row[kRowKernelKind]);
}

ViolationReport make_report(const reference::ViolationRing& ring, std::int64_t already_reported,
                            const ReportOptions& options) {
  constexpr const char* function = "make_report";
  if (ring.capacity < 0) Impl::throw_invalid_in(function, "ring capacity is ", ring.capacity, ", must be >= 0");
  // The ring holds min(count, capacity) rows, count read as uint64 (as the stages compare a seq).
  const std::uint64_t held = Impl::rows_held(ring.count, ring.capacity);
  if (static_cast<std::uint64_t>(ring.rows.size()) != held)
    Impl::throw_invalid_in(function, "ring holds ", ring.rows.size(), " rows but its count ", ring.count,
                           " and capacity ", ring.capacity, " say ", held);
  if (already_reported < 0 || static_cast<std::uint64_t>(already_reported) > held)
    Impl::throw_invalid_in(function, "already_reported is ", already_reported, ", must be in [0, ", held,
                           "] (the rows the ring holds; was the ring reset?)");

  ViolationReport report;
  report.count = ring.count;
  report.capacity = ring.capacity;
  report.overflowed = Impl::as_uint64(ring.count) > Impl::as_uint64(ring.capacity);
  report.lost_to_overflow = Impl::as_int64(Impl::rows_lost(ring.count, ring.capacity));
  report.newly_lost = report.lost_to_overflow;
  report.first_row = already_reported;
  report.rows_read = static_cast<std::int64_t>(held) - already_reported;
  report.slot_run_counter = ring.slot_run_counter;
  report.kernel_run_counter = ring.kernel_run_counter;
  for (std::size_t r = static_cast<std::size_t>(already_reported); r < ring.rows.size(); ++r) {
    const RingRow& row = ring.rows[r];
    if (!options.keep_never_written && is_never_written(row)) {
      Impl::note_dropped_row(report, row);
      continue;
    }
    report.rows.push_back(row);
    report.lines.push_back(format_violation(row));
  }
  return report;
}

std::string summary_line(const ViolationReport& report) {
  std::ostringstream line;
  line << "kv_canary report: rows=" << report.rows.size() << " dropped_never_written=" << report.dropped
       << " count=" << report.count << " capacity=" << report.capacity << " overflowed=" << (report.overflowed ? 1 : 0)
       << " lost_to_overflow=" << report.lost_to_overflow;
  return line.str();
}

std::string never_written_line(const ViolationReport& report) {
  if (report.dropped == 0) return "";
  std::string line = "kv_canary: " + std::to_string(report.dropped) + " never-written rows dropped (launch tags ";
  for (std::size_t k = 0; k < report.dropped_launch_tags.size(); ++k)
    line += (k == 0 ? "" : ", ") + std::string(kernel_kind_name(report.dropped_launch_tags[k]));
  return line + ")";
}

bool has_violations(const ViolationReport& report) {
  return !report.rows.empty() || report.newly_lost > 0;
}

namespace {

std::string error_message(const ViolationReport& report) {
  std::string message = "kvcanary: canary violations: " + summary_line(report);
  if (!report.lines.empty()) message += "; first: " + report.lines.front();
  return message;
}

}  // namespace

ViolationError::ViolationError(ViolationReport report)
    : std::runtime_error(error_message(report)), report_(std::move(report)) {}

void deliver(const ViolationReport& report, const ReportOptions& options) {
  const auto emit = [&](const std::string& line) {
    if (options.sink)
      options.sink(line);
    else
      std::cerr << line << '\n';
  };
  switch (options.mode) {
    case ReportMode::None:
      return;
    case ReportMode::Log:
      for (const std::string& line : report.lines) emit(line);
      if (report.dropped > 0) emit(never_written_line(report));
      if (report.newly_lost > 0) emit(summary_line(report));
      return;
    case ReportMode::Raise:
      if (report.dropped > 0) emit(never_written_line(report));  // a wiped record is never silent
      if (has_violations(report)) throw ViolationError(report);
      return;
  }
  Impl::throw_invalid_in("deliver", "options.mode is ", static_cast<int>(options.mode), ", not None, Log or Raise");
}

std::string report_json(const ViolationReport& report) {
  std::string out = "{";
  const auto number = [&](const char* key, std::int64_t value) {
    out += '"';
    out += key;
    out += "\": " + std::to_string(value) + ", ";
  };
  number("count", report.count);
  number("capacity", report.capacity);
  out += std::string("\"overflowed\": ") + (report.overflowed ? "true" : "false") + ", ";
  number("lost_to_overflow", report.lost_to_overflow);
  number("first_row", report.first_row);
  number("rows_read", report.rows_read);
  number("dropped", report.dropped);
  number("slot_run_counter", report.slot_run_counter);
  number("kernel_run_counter", report.kernel_run_counter);
  out += "\"rows\": [";
  for (std::size_t r = 0; r < report.rows.size(); ++r) {
    out += r == 0 ? "[" : ", [";
    for (int f = 0; f < kRingFields; ++f) out += (f == 0 ? "" : ", ") + std::to_string(report.rows[r][f]);
    out += ']';
  }
  out += "], \"lines\": [";
  for (std::size_t l = 0; l < report.lines.size(); ++l) {
    if (l > 0) out += ", ";
    append_json_string(out, report.lines[l]);
  }
  out += "]}";
  return out;
}

}  // namespace kvcanary
