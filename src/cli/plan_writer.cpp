#include "plan_writer.hpp"

#include "json_writer.hpp"

#include <algorithm>

namespace kvcanary {
namespace cli {

void write_plan_members(std::ostream& out, const reference::Outputs& o, std::int64_t batch_size, bool whole_seeds) {
  // What the plan says is valid; clamped to the arrays so that a broken plan still prints (and `check` tells).
  const std::size_t shown = o.enable == 1 ? static_cast<std::size_t>(std::max(o.verify_num_valid, 0)) : 0;
  out << "\"verify_plan\":{";
  Members verify_plan(out);
  verify_plan.scalar("verify_num_valid", o.verify_num_valid)
      .scalar("enable", o.enable)
      .array("verify_slot_indices", o.verify_slot_indices, shown)
      .array("verify_expected_tokens", o.verify_expected_tokens, shown)
      .array("verify_expected_positions", o.verify_expected_positions, shown)
      .array("verify_prev_slot_indices", o.verify_prev_slot_indices, shown);
  if (o.verify_identities) verify_plan.array("verify_identities", *o.verify_identities, shown);  // SPEC-CANARY §11.7
  out << "},\"write_plan\":{";
  Members write_plan(out);
  write_plan.array("write_offsets", o.write_offsets, o.write_offsets.size())
      .array("write_seed_slot_indices", o.write_seed_slot_indices, static_cast<std::size_t>(batch_size))
      .scalar("write_num_valid_reqs", o.write_num_valid_reqs);
  if (o.write_identities)
    write_plan.array("write_identities", *o.write_identities, static_cast<std::size_t>(batch_size));
  if (whole_seeds)
    write_plan.array("write_seed_slot_indices_all", o.write_seed_slot_indices, o.write_seed_slot_indices.size());
  out << "},\"status\":{";
  Members(out).scalar("input_error_bits", o.input_error_bits).scalar("first_bad_row", o.first_bad_row);
  out << '}';
}

}  // namespace cli
}  // namespace kvcanary
