#include "plan_writer.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

namespace kvcanary {
namespace cli {

namespace {

// The members of one JSON object, each after a comma but the first; integers only, written as they come.
class Members {
 public:
  explicit Members(std::ostream& out) : out_(out) {}

  Members& scalar(const char* name, std::int64_t value) {
    key(name);
    number(value);
    return *this;
  }

  // The first `count` values (at most all of them).
  Members& array(const char* name, const std::vector<std::int64_t>& values, std::size_t count) {
    key(name);
    out_ << '[';
    count = std::min(count, values.size());
    for (std::size_t i = 0; i < count; ++i) {
      if (i > 0) out_ << ',';
      number(values[i]);
    }
    out_ << ']';
    return *this;
  }

 private:
  void key(const char* name) {
    out_ << (first_ ? "\"" : ",\"") << name << "\":";
    first_ = false;
  }

  void number(std::int64_t value) {
    char text[24];
    const char* end = std::to_chars(text, text + sizeof text, value).ptr;
    out_.write(text, end - text);
  }

  std::ostream& out_;
  bool first_ = true;
};

}  // namespace

void write_plan_members(std::ostream& out, const reference::Outputs& o, std::int64_t batch_size, bool whole_seeds) {
  // What the plan says is valid; clamped to the arrays so that a broken plan still prints (and `check` tells).
  const std::size_t shown = o.enable == 1 ? static_cast<std::size_t>(std::max(o.verify_num_valid, 0)) : 0;
  out << "\"verify_plan\":{";
  Members(out)
      .scalar("verify_num_valid", o.verify_num_valid)
      .scalar("enable", o.enable)
      .array("verify_slot_indices", o.verify_slot_indices, shown)
      .array("verify_expected_tokens", o.verify_expected_tokens, shown)
      .array("verify_expected_positions", o.verify_expected_positions, shown)
      .array("verify_prev_slot_indices", o.verify_prev_slot_indices, shown);
  out << "},\"write_plan\":{";
  Members write_plan(out);
  write_plan.array("write_offsets", o.write_offsets, o.write_offsets.size())
      .array("write_seed_slot_indices", o.write_seed_slot_indices, static_cast<std::size_t>(batch_size))
      .scalar("write_num_valid_reqs", o.write_num_valid_reqs);
  if (whole_seeds)
    write_plan.array("write_seed_slot_indices_all", o.write_seed_slot_indices, o.write_seed_slot_indices.size());
  out << "},\"status\":{";
  Members(out).scalar("input_error_bits", o.input_error_bits).scalar("first_bad_row", o.first_bad_row);
  out << '}';
}

}  // namespace cli
}  // namespace kvcanary
