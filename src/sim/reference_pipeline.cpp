// ReferencePipeline (reference_pipeline.hpp): DevicePipeline's step on the host reference.

#include "reference_pipeline.hpp"

#include "device_pipeline.hpp"  // model_kv_byte: the one definition of the model's bytes

namespace kvcanary {
namespace sim {

ReferencePipeline::ReferencePipeline(const EngineShape& shape, const SimulationOptions& options)
    : shape_(shape), options_(options) {
  const std::int64_t row_bytes = shape.page_size * shape.bytes_per_token;
  for (reference::RealKv* real : {&real_k_, &real_v_}) {
    real->mode = options.real_kv;
    reference::RealKvSource source;
    source.bytes.assign(static_cast<std::size_t>(shape.num_pages * row_bytes), 0);
    source.pages = shape.num_pages;
    source.row_bytes = row_bytes;
    source.page_size = shape.page_size;
    source.bytes_per_token = source.read_bytes = shape.bytes_per_token;
    real->sources = {source};
  }
  for (int g = 0; g < kGroups; ++g) {
    GroupState& s = groups_[g];
    s.on = g == 0 || (g == 1 && shape.draft_group) || (g == 2 && shape.swa_window > 0);
    if (!s.on) continue;
    s.inputs.max_reqs = s.inputs.pool_rows = shape.rows;
    s.inputs.max_seq_len = s.inputs.pool_cols = shape.cols;
    s.inputs.req_to_token.assign(static_cast<std::size_t>(shape.rows * shape.cols), 0);
    s.inputs.req_to_verify_expected_tokens.emplace(static_cast<std::size_t>(shape.rows * shape.cols), 0);
    if (g == 1) s.inputs.kv_token_id_vs_position_offset = 1;
    if (g == 2) {
      s.inputs.swa_window_size = shape.swa_window;
      s.inputs.full_to_swa_index_mapping.emplace(static_cast<std::size_t>(shape.num_slots), 0);
      s.head_k = KernelKind::HEAD_K_SWA;
      s.head_v = KernelKind::HEAD_V_SWA;
    }
    s.plan = reference::make_outputs(shape.verify_capacity, shape.max_batch, 0);
    if (shape.identities) {  // SPEC-CANARY §11.7: plans that carry the requests' identities
      s.plan.verify_identities.emplace(static_cast<std::size_t>(shape.verify_capacity), 0);
      s.plan.write_identities.emplace(static_cast<std::size_t>(shape.max_batch), 0);
    }
    s.k.assign(static_cast<std::size_t>(shape.num_slots), reference::Record{});
    s.v = s.k;
    s.ring.capacity = options.ring_capacity;
  }
  sweep_plan_ = reference::make_outputs(shape.sweep_verify_capacity, shape.max_cache_entries, 0);
  if (shape.identities) {
    sweep_plan_.verify_identities.emplace(static_cast<std::size_t>(shape.sweep_verify_capacity), 0);
    sweep_plan_.write_identities.emplace(static_cast<std::size_t>(shape.max_cache_entries), 0);
  }
}

void ReferencePipeline::upload(const Engine& engine, const StepData& data) {
  const std::int64_t cols = shape_.cols;
  for (int g = 0; g < kGroups; ++g) {
    GroupState& s = groups_[g];
    if (!s.on) continue;
    for (const auto row : data.dirty_rows) {
      std::copy_n(engine.req_to_token().begin() + row * cols, cols, s.inputs.req_to_token.begin() + row * cols);
      std::copy_n(engine.token_pool().begin() + row * cols, cols, s.inputs.req_to_verify_expected_tokens->begin() + row * cols);
    }
    if (g == 2 && data.lut_dirty) *s.inputs.full_to_swa_index_mapping = engine.swa_lut();
    s.inputs.req_pool_indices = data.req_pool_indices;
    s.inputs.prefix_lens = data.prefix_lens;
    s.inputs.extend_seq_lens = data.extend_seq_lens;
    s.inputs.req_to_verify_expected_tokens_valid_lens = data.valid_lens;
    if (shape_.identities) s.inputs.req_identities = data.identities;
    const GroupTokens& t = data.tokens[g];
    s.tokens.input_ids = t.input_ids;
    s.tokens.positions = t.positions;
    s.tokens.out_cache_loc = t.out_cache_loc;
    s.tokens.expected_input_ids = t.expected_input_ids;
    s.tokens.expected_positions = t.expected_positions;
    s.tokens.chain_position_assert = 1;
  }
  // The engine's frees since the last step, stamped FREED before the head (as the device pipeline does).
  for (int g = 0; g < kGroups; ++g) {
    GroupState& s = groups_[g];
    if (!s.on || data.freed[g].empty()) continue;
    reference::free(data.freed[g], data.step, s.head_k, s.k, s.ring);
    reference::free(data.freed[g], data.step, s.head_v, s.v, s.ring);
  }
  if (data.sweep) {
    sweep_inputs_ = groups_[0].inputs;
    sweep_inputs_.req_pool_indices = data.sweep_pool_indices;
    sweep_inputs_.prefix_lens = data.sweep_prefix_lens;
    sweep_inputs_.extend_seq_lens = data.sweep_extend_seq_lens;
    sweep_inputs_.req_to_verify_expected_tokens_valid_lens = data.sweep_valid_lens;
    if (shape_.identities) sweep_inputs_.req_identities = data.sweep_identities;
  }
}

// The checks of SPEC-CANARY §11 as the device pipeline's verify() runs them: the library's defaults.
constexpr VerifyChecks kChecks{};

void ReferencePipeline::head(const StepData& data) {
  for (int g = 0; g < kGroups; ++g) {
    GroupState& s = groups_[g];
    if (!s.on) continue;
    const reference::RealKv none{};
    const reference::RealKv& rk = g == 0 ? real_k_ : none;
    const reference::RealKv& rv = g == 0 ? real_v_ : none;
    reference::plan(s.inputs, s.plan);
    reference::verify(s.plan, s.k, s.head_k, rk, true, kChecks, s.ring);
    reference::verify(s.plan, s.v, s.head_v, rv, true, kChecks, s.ring);
    if (g == 0) {  // the attention backend's own copy of the table (SPEC-CANARY §11.4)
      reference::BackendMetadata metadata;
      metadata.kv_indptr = data.kv_indptr;
      metadata.kv_indices = data.kv_indices;
      metadata.kv_indices.resize(static_cast<std::size_t>(shape_.max_batch * shape_.cols), 0);  // the device's capacity
      reference::cross_check(s.inputs, metadata, KernelKind::HEAD_K_FULL, s.ring);
    }
    reference::write(s.plan, s.tokens, s.head_k, rk, s.k, s.ring);
    reference::write(s.plan, s.tokens, s.head_v, rv, s.v, s.ring);
  }
}

void ReferencePipeline::model_write(const StepData& data) {
  const GroupState& s = groups_[0];
  for (std::size_t i = 0; i < s.tokens.out_cache_loc.size(); ++i) {
    const std::int64_t slot = s.tokens.out_cache_loc[i];
    if (slot < 0 || slot >= shape_.num_slots) continue;
    for (int tensor = 0; tensor < 2; ++tensor) {
      auto& source = (tensor == 0 ? real_k_ : real_v_).sources[0];
      const std::int64_t base = (slot / shape_.page_size) * source.row_bytes + (slot % shape_.page_size) * shape_.bytes_per_token;
      for (std::int64_t b = 0; b < shape_.bytes_per_token; ++b)
        source.bytes[static_cast<std::size_t>(base + b)] = model_kv_byte(s.tokens.input_ids[i], s.tokens.positions[i], b, tensor);
    }
  }
  for (const ByteFlip& flip : data.flips) {
    auto& source = (flip.tensor == 0 ? real_k_ : real_v_).sources[0];
    source.bytes[static_cast<std::size_t>((flip.slot / shape_.page_size) * source.row_bytes +
                                          (flip.slot % shape_.page_size) * shape_.bytes_per_token + flip.byte)] ^= flip.mask;
  }
}

void ReferencePipeline::tail(const StepData&) {
  GroupState& s = groups_[0];
  reference::verify(s.plan, s.k, KernelKind::TAIL_K_FULL, real_k_, true, kChecks, s.ring);
  reference::verify(s.plan, s.v, KernelKind::TAIL_V_FULL, real_v_, true, kChecks, s.ring);
  reference::write(s.plan, s.tokens, KernelKind::TAIL_K_FULL, real_k_, s.k, s.ring);
  reference::write(s.plan, s.tokens, KernelKind::TAIL_V_FULL, real_v_, s.v, s.ring);
}

void ReferencePipeline::sweep(const StepData&) {
  GroupState& s = groups_[0];
  reference::plan(sweep_inputs_, sweep_plan_);
  reference::verify(sweep_plan_, s.k, KernelKind::SWEEP_K_FULL, real_k_, true, kChecks, s.ring);
  reference::verify(sweep_plan_, s.v, KernelKind::SWEEP_V_FULL, real_v_, true, kChecks, s.ring);
  reference::check_padding_slot(real_k_, reference::padding_fold_of_zeros(real_k_), KernelKind::SWEEP_K_FULL, s.ring);
  reference::check_padding_slot(real_v_, reference::padding_fold_of_zeros(real_v_), KernelKind::SWEEP_V_FULL, s.ring);
}

std::int64_t ReferencePipeline::read(std::vector<GroupRow>& rows) {
  std::int64_t overflows = 0;
  for (int g = 0; g < kGroups; ++g) {
    GroupState& s = groups_[g];
    if (!s.on) continue;
    if (s.ring.count > s.ring.capacity) ++overflows;
    for (const auto& row : s.ring.rows) rows.push_back({static_cast<Group>(g), row});
    s.ring.rows.clear();
    s.ring.count = 0;
  }
  return overflows;
}

}  // namespace sim
}  // namespace kvcanary
