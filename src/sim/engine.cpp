// The engine model (engine.hpp): scheduling, paging, the prefix cache, the faults and the attribution
// of ring rows. Every decision draws from one seeded generator, on the host, in a fixed order, so a
// seed gives the same run on every backend.

#include "engine.hpp"

#include <kvcanary/stages/report.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

namespace kvcanary {
namespace sim {

namespace {
constexpr std::int64_t kCacheReader = std::int64_t(1) << 40;  // reader ids of prefix-cache entries
constexpr int kNumTemplates = 4;
constexpr int kAllGroups = 7;
constexpr int kTargetOnly = 1;
constexpr std::int64_t kRemainingToPick = 4;  // a fault's victim stays running at least this many tokens
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
int group_bit(Group g) { return 1 << static_cast<int>(g); }
}  // namespace

std::int64_t faults_per_class(const SimulationOptions& o) {
  if (o.faults_per_class > 0) return o.faults_per_class;
  return std::clamp<std::int64_t>(o.steps / 400, 1, kMaxDefaultFaultsPerClass);
}

EngineShape engine_shape(const SimulationOptions& o) {
  if (o.steps < 0) throw std::invalid_argument("kvcanary simulate: steps must be >= 0");
  if (o.page_size < 1) throw std::invalid_argument("kvcanary simulate: page size must be >= 1");
  if (o.max_batch < 1) throw std::invalid_argument("kvcanary simulate: max batch must be >= 1");
  if (o.swa_window < 0) throw std::invalid_argument("kvcanary simulate: the SWA window must be >= 0");
  if (o.max_prompt < 2 || o.max_output < 1 || o.prefill_chunk < 1 || o.num_draft_tokens < 0)
    throw std::invalid_argument("kvcanary simulate: prompt >= 2, output >= 1, chunk >= 1, draft tokens >= 0");
  if (o.output_tokens < 0) throw std::invalid_argument("kvcanary simulate: output tokens must be >= 0");
  EngineShape s;
  s.page_size = o.page_size;
  s.max_batch = o.max_batch;
  s.cols = o.max_prompt + std::max(o.max_output, o.output_tokens);
  s.max_cache_entries = kNumTemplates;
  s.rows = 1 + s.max_batch + s.max_cache_entries;
  const std::int64_t per_request = ceil_div(s.cols, s.page_size);
  const std::int64_t faults = faults_per_class(o);
  s.num_pages = 1 + s.max_batch * per_request + s.max_cache_entries * per_request +
                static_cast<std::int64_t>(o.faults.size()) * faults * 2 * per_request + 8;
  s.num_slots = s.num_pages * s.page_size;
  const std::int64_t decode_tokens = 1 + (o.spec_decode ? o.num_draft_tokens : 0);
  s.token_budget = o.full_batch ? std::max(o.step_token_budget, s.max_batch * decode_tokens + o.prefill_chunk)
                                : o.step_token_budget;
  s.token_capacity = std::max(s.token_budget, s.max_batch * decode_tokens);
  s.verify_capacity = s.max_batch * s.cols;
  s.sweep_verify_capacity = s.max_cache_entries * s.cols;
  s.swa_window = o.swa_window;
  s.draft_group = o.spec_decode;
  s.identities = std::find(o.faults.begin(), o.faults.end(), FaultClass::CrossIdentityHit) != o.faults.end();
  return s;
}

Engine::Engine(const SimulationOptions& options)
    : options_(options), shape_(engine_shape(options)), rng_(options.seed) {
  req_to_token_.assign(static_cast<std::size_t>(shape_.rows * shape_.cols), 0);
  token_pool_.assign(static_cast<std::size_t>(shape_.rows * shape_.cols), 0);
  lut_.resize(static_cast<std::size_t>(shape_.num_slots));
  // A bijection full slot → SWA slot that keeps slot 0 (padding) at 0: the SWA pool is laid out apart.
  for (std::int64_t s = 0; s < shape_.num_slots; ++s) lut_[s] = s;
  std::shuffle(lut_.begin() + 1, lut_.end(), rng_);
  page_refs_.assign(static_cast<std::size_t>(shape_.num_pages), 0);
  quarantined_.assign(static_cast<std::size_t>(shape_.num_pages), 0);
  for (std::int64_t p = shape_.num_pages - 1; p >= 1; --p) free_pages_.push_back(p);  // page 0 holds slot 0
  for (std::int64_t r = shape_.max_batch; r >= 1; --r) free_rows_.push_back(r);
  for (std::int64_t r = shape_.rows - 1; r > shape_.max_batch; --r) free_cache_rows_.push_back(r);
  for (std::int64_t r = 0; r < shape_.rows; ++r) dirty_rows_.insert(r);
  for (int t = 0; t < kNumTemplates; ++t) {
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(uniform(24, std::max<std::int64_t>(25, options_.max_prompt / 2))));
    for (auto& token : tokens) token = static_cast<std::int32_t>(uniform(1, 50000));
    templates_.push_back(std::move(tokens));
  }
  schedule_faults();
}

std::int64_t Engine::long_tailed(double median, double sigma, std::int64_t lo, std::int64_t hi) {
  const double x = std::lognormal_distribution<double>(std::log(median), sigma)(rng_);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::llround(x)), lo, hi);
}

Engine::Request* Engine::request_by_id(std::int64_t id) {
  const auto it = running_.find(id);
  return it == running_.end() ? nullptr : &it->second;
}
const Engine::Request* Engine::request_by_id(std::int64_t id) const {
  const auto it = running_.find(id);
  return it == running_.end() ? nullptr : &it->second;
}

std::int64_t Engine::slot_of(const Request& r, std::int64_t position) const {
  return r.pages[static_cast<std::size_t>(position / shape_.page_size)] * shape_.page_size + position % shape_.page_size;
}

// Only whole pages are shared, and only those whose next token is still the template's, so that the
// draft group's expected token (the token after) agrees too (SPEC-CANARY §10).
std::int64_t Engine::shared_template_tokens(int t) const {
  const auto length = static_cast<std::int64_t>(templates_[static_cast<std::size_t>(t)].size());
  return ((length - 1) / shape_.page_size) * shape_.page_size;
}

// ---- paging ----

std::int64_t Engine::allocate_page() {
  std::int64_t page;
  if (forced_page_ >= 0) {  // the double-allocation bug: a live page handed out again
    page = forced_page_;
    forced_page_ = -1;
  } else {
    if (free_pages_.empty()) return -1;
    page = free_pages_.back();
    free_pages_.pop_back();
  }
  page_refs_[page] = 1;
  return page;
}

void Engine::release_page(std::int64_t page) {
  if (quarantined_[page]) return;  // a fault's page: never handed out again
  if (--page_refs_[page] == 0) {
    free_pages_.push_back(page);
    stamp_freed(page);
  }
}

void Engine::stamp_freed(std::int64_t page) { freed_pages_.push_back(page); }

void Engine::set_row_page(Request& r, std::int64_t index) {
  const std::int64_t page = r.pages[static_cast<std::size_t>(index)];
  for (std::int64_t o = 0; o < shape_.page_size; ++o) {
    const std::int64_t position = index * shape_.page_size + o;
    if (position < shape_.cols)
      req_to_token_[r.row * shape_.cols + position] = static_cast<std::int32_t>(page * shape_.page_size + o);
  }
  dirty_rows_.insert(r.row);
}

bool Engine::ensure_pages(Request& r, std::int64_t positions) {
  while (static_cast<std::int64_t>(r.pages.size()) * shape_.page_size < positions) {
    const std::int64_t forced_fault = forced_page_ >= 0 ? forced_fault_ : -1;
    std::int64_t page = allocate_page();
    if (page < 0 && evict_one_cache_entry()) page = allocate_page();
    if (page < 0) return false;
    r.pages.push_back(page);
    if (r.reserved > 0) {
      --r.reserved;
      --reserved_pages_;
    }
    set_row_page(r, static_cast<std::int64_t>(r.pages.size()) - 1);
    // A page a fault put in the allocator's way: its new holder is part of the fault.
    std::int64_t fault_id = forced_fault;
    for (auto& f : faults_)
      if (fault_id < 0 && (f.record.fault == FaultClass::UseAfterFree || f.record.fault == FaultClass::StalePrefixHit) &&
          std::find(f.record.slots.begin(), f.record.slots.end(), page * shape_.page_size) != f.record.slots.end())
        fault_id = f.record.id;
    if (fault_id >= 0) {
      faults_[static_cast<std::size_t>(fault_id)].requests.insert(r.id);
      r.tainted = true;
    }
  }
  return true;
}

bool Engine::evict_one_cache_entry() {
  auto victim = cache_.end();
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    bool idle = true;
    for (const auto page : it->second.pages) idle = idle && (quarantined_[page] || page_refs_[page] == 1);
    if (idle && (victim == cache_.end() || it->second.last_use < victim->second.last_use)) victim = it;
  }
  if (victim == cache_.end()) return false;
  for (const auto page : victim->second.pages) release_page(page);
  free_cache_rows_.push_back(victim->second.row);
  cache_.erase(victim);
  return true;
}

// ---- requests ----

// `forced_template` >= 0: a request that starts with that template (a fault's hit), no draw for it.
Engine::Request Engine::make_request(int forced_template) {
  Request r;
  r.id = next_request_id_++;
  std::vector<std::int32_t> prompt;
  if (forced_template >= 0 || uniform(0, 1) == 1) {  // half the traffic starts with one of a few shared system prompts
    r.template_id = forced_template >= 0 ? forced_template : static_cast<int>(uniform(0, kNumTemplates - 1));
    prompt = templates_[static_cast<std::size_t>(r.template_id)];
  }
  const auto head = static_cast<std::int64_t>(prompt.size());
  const std::int64_t prompt_len =
      std::min(options_.max_prompt, head + long_tailed(40.0, 0.9, 1, options_.max_prompt));
  while (static_cast<std::int64_t>(prompt.size()) < prompt_len) prompt.push_back(static_cast<std::int32_t>(uniform(1, 50000)));
  if (static_cast<std::int64_t>(prompt.size()) <= head) r.template_id = -1;  // no room for a token after it
  r.prompt_len = prompt_len;
  const std::int64_t output =
      options_.output_tokens > 0 ? options_.output_tokens : long_tailed(24.0, 1.0, 1, options_.max_output);
  r.total_len = prompt_len + output;
  r.tokens = prompt;
  while (static_cast<std::int64_t>(r.tokens.size()) < r.total_len) r.tokens.push_back(static_cast<std::int32_t>(uniform(1, 50000)));
  return r;
}

void Engine::admit_requests() {
  if (uniform(0, 99) < 40 && arrivals_waiting_ < 16) ++arrivals_waiting_;
  if (options_.full_batch)  // a queue that never runs dry: every free batch row is taken at once
    arrivals_waiting_ = std::max(arrivals_waiting_, shape_.max_batch - static_cast<std::int64_t>(running_.size()));
  while (arrivals_waiting_ > 0 && static_cast<std::int64_t>(running_.size()) < shape_.max_batch && !free_rows_.empty()) {
    if (admit(make_request()) == nullptr) {
      --next_request_id_;  // admitted later, drawn again
      return;
    }
    --arrivals_waiting_;
  }
}

// A new request into a free row (the caller checked there is one), its pages reserved, a prefix-cache
// hit's pages shared (and, on a stale entry, its fault's damage inherited).
Engine::Request* Engine::admit(Request r) {
  const auto hit = r.template_id >= 0 ? cache_.find(r.template_id) : cache_.end();
  const std::int64_t shared = hit != cache_.end() ? static_cast<std::int64_t>(hit->second.pages.size()) : 0;
  const std::int64_t need = ceil_div(r.total_len, shape_.page_size) - shared;
  while (static_cast<std::int64_t>(free_pages_.size()) - reserved_pages_ < need && evict_one_cache_entry()) {
  }
  if (static_cast<std::int64_t>(free_pages_.size()) - reserved_pages_ < need) return nullptr;
  r.row = free_rows_.back();
  free_rows_.pop_back();
  r.reserved = need;
  reserved_pages_ += need;
  std::copy(r.tokens.begin(), r.tokens.end(), token_pool_.begin() + r.row * shape_.cols);
  dirty_rows_.insert(r.row);
  const auto it = cache_.find(r.template_id);
  if (hit != cache_.end() && it != cache_.end()) {  // a prefix-cache hit: its pages, already written
    CacheEntry& entry = it->second;
    entry.last_use = step_;
    r.cache_entry = entry.id;
    for (const auto page : entry.pages) {
      r.pages.push_back(page);
      if (!quarantined_[page]) ++page_refs_[page];
      set_row_page(r, static_cast<std::int64_t>(r.pages.size()) - 1);
    }
    r.shared_pages = shared;
    r.written = entry.tokens;
    for (auto& f : faults_)  // a hit on a stale entry: the request reads what the entry's fault damaged
      if (f.cache_entries.count(entry.id)) {
        f.requests.insert(r.id);
        r.tainted = true;
        std::vector<Damage> more;
        for (const auto& d : f.damage)
          if (d.reader == kCacheReader + entry.id) more.push_back({r.id, d.position, now(0), d.groups});
        f.damage.insert(f.damage.end(), more.begin(), more.end());
        for (std::size_t i = 0; i < entry.pages.size(); ++i)
          for (std::int64_t o = 0; o < shape_.page_size; ++o)
            watches_[entry.pages[i] * shape_.page_size + o].push_back(
                {f.record.id, r.id, static_cast<std::int64_t>(i) * shape_.page_size + o});
      }
  }
  const std::int64_t id = r.id;
  running_.emplace(id, std::move(r));
  return request_by_id(id);
}

void Engine::maybe_insert_cache_entry(const Request& r) {
  // The cache holds identity 0's prefixes only: an engine keys its cache by identity, so another identity's
  // pages are never served to identity 0 (the cross_identity fault breaks the other direction).
  if (r.template_id < 0 || r.tainted || r.identity != 0 || cache_.count(r.template_id) || free_cache_rows_.empty()) return;
  const std::int64_t tokens = shared_template_tokens(r.template_id);
  const std::int64_t pages = tokens / shape_.page_size;
  if (pages < 1 || r.written < tokens + 1) return;
  for (std::int64_t i = 0; i < pages; ++i)
    if (quarantined_[r.pages[static_cast<std::size_t>(i)]]) return;
  CacheEntry entry;
  entry.id = next_cache_id_++;
  entry.template_id = r.template_id;
  entry.tokens = tokens;
  entry.last_use = step_;
  entry.row = free_cache_rows_.back();
  free_cache_rows_.pop_back();
  for (std::int64_t i = 0; i < pages; ++i) {
    const std::int64_t page = r.pages[static_cast<std::size_t>(i)];
    entry.pages.push_back(page);
    ++page_refs_[page];
    for (std::int64_t o = 0; o < shape_.page_size; ++o)
      req_to_token_[entry.row * shape_.cols + i * shape_.page_size + o] = static_cast<std::int32_t>(page * shape_.page_size + o);
  }
  std::copy(r.tokens.begin(), r.tokens.begin() + tokens + 1, token_pool_.begin() + entry.row * shape_.cols);
  dirty_rows_.insert(entry.row);
  cache_.emplace(entry.template_id, std::move(entry));
}

void Engine::finish_request(Request& r, bool aborted) {
  for (auto& f : faults_)  // the engine repairs a LUT entry when the slot's holder leaves
    if (f.lut_slot >= 0 && std::find(r.pages.begin(), r.pages.end(), f.lut_slot / shape_.page_size) != r.pages.end()) {
      lut_[f.lut_slot] = f.lut_old;
      f.lut_slot = -1;
      lut_dirty_ = true;
    }
  if (!aborted) maybe_insert_cache_entry(r);
  for (const auto page : r.pages) release_page(page);
  reserved_pages_ -= r.reserved;
  free_rows_.push_back(r.row);
  (aborted ? requests_aborted_ : requests_finished_) += 1;
  running_.erase(r.id);
}

// ---- the step ----

const StepData& Engine::begin_step(std::int64_t step) {
  step_ = step;
  data_ = StepData{};
  data_.step = step;
  if (!repair_flips_.empty()) {  // XOR again: the padding slot's bytes are zero once more after this step's model write
    data_.flips = repair_flips_;
    repair_flips_.clear();
    padding_fault_active_ = false;
  }
  for (auto& entry : schedule_)  // a request of another identity takes a row freed last step, before the queue
    if (entry.first >= 0 && entry.first <= step && entry.second == FaultClass::CrossIdentityHit && inject(entry.second, 0))
      entry.first = -1;
  admit_requests();
  inject_pre_step_faults();
  build_batch();
  // faults at the head write (they edit the step's token arrays), then after the model's KV write
  for (auto& entry : schedule_)
    if (entry.first >= 0 && entry.first <= step) {
      const FaultClass c = entry.second;
      const int phase = (c == FaultClass::KvByteFlip || c == FaultClass::PaddingKv) ? 2
                        : (c == FaultClass::RogueWrite || c == FaultClass::PositionOffByOne || c == FaultClass::SwappedTokens) ? 1
                                                                                                                               : 0;
      if (phase > 0 && inject(c, phase)) entry.first = -1;
    }
  build_backend_metadata();
  for (auto& entry : schedule_)  // a stale copy of the table: after the backend built it
    if (entry.first >= 0 && entry.first <= step && entry.second == FaultClass::StaleMetadata &&
        inject(entry.second, 1))
      entry.first = -1;
  if (options_.sweep_every > 0 && step % options_.sweep_every == options_.sweep_every - 1 && !cache_.empty()) {
    data_.sweep = true;
    for (const auto& [t, entry] : cache_) {
      data_.sweep_pool_indices.push_back(entry.row);
      data_.sweep_prefix_lens.push_back(entry.tokens);
      data_.sweep_extend_seq_lens.push_back(0);
      data_.sweep_valid_lens.push_back(entry.tokens + 1);
    }
    data_.sweep_batch_size = shape_.max_cache_entries;
    data_.sweep_pool_indices.resize(static_cast<std::size_t>(data_.sweep_batch_size), 0);
    data_.sweep_prefix_lens.resize(static_cast<std::size_t>(data_.sweep_batch_size), 0);
    data_.sweep_extend_seq_lens.resize(static_cast<std::size_t>(data_.sweep_batch_size), 0);
    data_.sweep_valid_lens.resize(static_cast<std::size_t>(data_.sweep_batch_size), 0);
    if (shape_.identities) data_.sweep_identities.assign(static_cast<std::size_t>(data_.sweep_batch_size), 0);
  }
  for (const std::int64_t page : freed_pages_)
    for (std::int64_t o = 0; o < shape_.page_size; ++o) {
      const std::int64_t slot = page * shape_.page_size + o;
      data_.freed[static_cast<int>(Group::Target)].push_back(slot);
      if (shape_.draft_group) data_.freed[static_cast<int>(Group::Draft)].push_back(slot);
      if (shape_.swa_window > 0) data_.freed[static_cast<int>(Group::Swa)].push_back(lut_[slot]);
    }
  freed_pages_.clear();
  data_.dirty_rows.assign(dirty_rows_.begin(), dirty_rows_.end());
  dirty_rows_.clear();
  data_.lut_dirty = lut_dirty_;
  lut_dirty_ = false;
  mark_exercised();
  return data_;
}

void Engine::build_batch() {
  batch_.clear();
  batch_prefix_.clear();
  std::int64_t budget = shape_.token_budget;
  std::vector<Request*> order;
  for (auto& [id, r] : running_) order.push_back(&r);
  // decode first, then prefill chunks from what the budget leaves
  std::stable_sort(order.begin(), order.end(), [](const Request* a, const Request* b) {
    return (a->written >= a->prompt_len) > (b->written >= b->prompt_len);
  });
  for (Request* r : order) {
    r->extend = r->advance = 0;
    if (r->written < r->prompt_len) {
      r->extend = r->advance = std::min({r->prompt_len - r->written, options_.prefill_chunk, budget});
    } else {
      const std::int64_t drafts =
          options_.spec_decode ? std::min<std::int64_t>(options_.num_draft_tokens, r->total_len - r->written - 1) : 0;
      if (1 + drafts <= budget) {
        r->extend = 1 + drafts;
        r->advance = 1 + uniform(0, drafts);  // the drafts the target accepted
      }
    }
    if (r->extend > 0 && !ensure_pages(*r, r->written + r->extend)) r->extend = r->advance = 0;
    budget -= r->extend;
  }
  hold_back_open_writes();
  for (const auto& [id, r] : running_)
    if (r.extend > 0 && r.written < r.prompt_len) ++data_.prefill_rows;
  std::int64_t bucket = 1;
  while (bucket < static_cast<std::int64_t>(running_.size())) bucket *= 2;
  data_.batch_size = std::min(bucket, shape_.max_batch);
  data_.live = static_cast<std::int64_t>(running_.size());
  auto& target = data_.tokens[static_cast<int>(Group::Target)];
  auto& draft = data_.tokens[static_cast<int>(Group::Draft)];
  auto& swa = data_.tokens[static_cast<int>(Group::Swa)];
  for (auto& [id, r] : running_) {
    batch_.push_back(id);
    batch_prefix_.push_back(r.written);
    data_.req_pool_indices.push_back(r.row);
    data_.prefix_lens.push_back(r.written);
    data_.extend_seq_lens.push_back(r.extend);
    data_.valid_lens.push_back(r.total_len);
    if (shape_.identities) data_.identities.push_back(r.identity);
    r.token_begin = static_cast<std::int64_t>(target.input_ids.size());
    for (std::int64_t j = 0; j < r.extend; ++j) {
      const std::int64_t position = r.written + j;
      const bool rejected = j >= r.advance;  // a rejected draft token: rewritten at the next step
      const std::int64_t token = rejected ? uniform(50001, 60000) : r.tokens[static_cast<std::size_t>(position)];
      const std::int64_t slot = slot_of(r, position);
      for (GroupTokens* g : {&target, &draft, &swa}) {
        std::int64_t t = token;
        if (g == &draft) t = rejected ? uniform(50001, 60000) : position + 1 < r.total_len ? r.tokens[static_cast<std::size_t>(position + 1)] : 0;
        g->input_ids.push_back(t);
        g->expected_input_ids.push_back(t);
        g->positions.push_back(position);
        g->expected_positions.push_back(position);
        g->out_cache_loc.push_back(g == &swa ? lut_[slot] : slot);
      }
      note_write(r, position, slot, token, kAllGroups);
    }
  }
  for (auto* v : {&data_.req_pool_indices, &data_.prefix_lens, &data_.extend_seq_lens, &data_.valid_lens})
    v->resize(static_cast<std::size_t>(data_.batch_size), 0);
  if (shape_.identities) data_.identities.resize(static_cast<std::size_t>(data_.batch_size), 0);
  for (GroupTokens* g : {&target, &draft, &swa}) {
    for (auto* v : {&g->input_ids, &g->positions, &g->expected_input_ids, &g->expected_positions})
      v->resize(static_cast<std::size_t>(shape_.token_capacity), 0);
    g->out_cache_loc.resize(static_cast<std::size_t>(shape_.token_capacity), -1);
  }
}

// SPEC-CANARY §4 leaves the outcome of a write call open when one request's seed slot is a slot another
// request writes in the same call, or when two tokens write one slot: which store a seed read sees is a
// race. A fault can make either happen (a stale prefix, a page handed out twice, a freed page reused).
// The simulator promises that a seed gives the same run on every backend, so the engine never hands the
// canary such a call: a row whose seed (in the full or the SWA slot space) another row writes this step,
// or which writes a slot an earlier row of the batch writes, is held back for the step (extend 0: it
// writes nothing, its prefix is still verified) and writes at the next one, when the other row's store
// has landed. Holding a row only removes writes, so the loop ends; the order is the batch's.
void Engine::hold_back_open_writes() {
  const auto swa_slot = [&](std::int64_t slot) {  // SPEC §3's T with the LUT: negative passes, large clamps
    return slot < 0 ? slot : lut_[static_cast<std::size_t>(std::min(slot, shape_.num_slots - 1))];
  };
  const bool swa = shape_.swa_window > 0;
  step_seeds_.clear();
  step_targets_.clear();
  for (bool changed = true; changed;) {
    changed = false;
    std::map<std::int64_t, std::int64_t> writer[2];  // slot → the first row (request id) writing it; [1]: SWA
    std::set<std::int64_t> duplicated;                // requests writing a slot an earlier row writes
    for (const auto& [id, r] : running_)
      for (std::int64_t j = 0; j < r.extend; ++j) {
        const std::int64_t slot = slot_of(r, r.written + j);
        for (int space = 0; space < (swa ? 2 : 1); ++space) {
          const auto [it, first] = writer[space].emplace(space == 0 ? slot : swa_slot(slot), id);
          if (!first && it->second != id) duplicated.insert(id);
        }
      }
    for (auto& [id, r] : running_) {
      if (r.extend == 0) continue;
      bool open = duplicated.count(id) > 0;
      if (r.written > 0) {
        const std::int64_t seed = req_to_token_[static_cast<std::size_t>(r.row * shape_.cols + r.written - 1)];
        for (int space = 0; space < (swa ? 2 : 1); ++space) {
          const auto it = writer[space].find(space == 0 ? seed : swa_slot(seed));
          open = open || (it != writer[space].end() && it->second != id);
        }
      }
      if (open) {
        r.extend = r.advance = 0;
        changed = true;
      }
    }
    if (!changed)  // what the write-time faults must keep clear of (target group)
      for (const auto& [id, r] : running_)
        if (r.extend > 0) {
          if (r.written > 0) step_seeds_.insert(req_to_token_[static_cast<std::size_t>(r.row * shape_.cols + r.written - 1)]);
          for (std::int64_t j = 0; j < r.extend; ++j) step_targets_.insert(slot_of(r, r.written + j));
        }
  }
}

void Engine::end_step(const std::vector<GroupRow>& rows, std::int64_t ring_overflows) {
  ring_overflows_ += ring_overflows;
  // (fault, group, tier) → slots; tier 0: the slots it aimed at, tier 1: those of what it tainted
  std::map<std::array<std::int64_t, 3>, std::set<std::int64_t>> slot_sets;
  for (const auto& [group, row] : rows) {
    ++rows_;
    if (is_never_written(row)) ++never_written_rows_;
    // The most specific explanation wins: aimed-at slots before tainted holders, and a fault the
    // contract can see before one it cannot (an uncovered fault explains no row when a covered one does).
    std::vector<Fault*> explains;
    for (int tier = 0; tier < 2 && explains.empty(); ++tier) {
      for (auto& f : faults_) {
        const std::array<std::int64_t, 3> key{f.record.id, static_cast<int>(group), tier};
        auto it = slot_sets.find(key);
        if (it == slot_sets.end()) it = slot_sets.emplace(key, attributable_slots(f, group, tier == 0)).first;
        if (it->second.count(row[kRowSlot])) explains.push_back(&f);
      }
      if (std::any_of(explains.begin(), explains.end(), [](const Fault* f) { return f->record.covered; }))
        explains.erase(std::remove_if(explains.begin(), explains.end(), [](const Fault* f) { return !f->record.covered; }),
                       explains.end());
    }
    for (Fault* f : explains) {
      FaultRecord& r = f->record;
      if (r.detected_step < 0) r.detected_step = step_;
      r.reason_bits |= row[kRowFailReasonBits];
      r.kinds |= std::int64_t(1) << (row[kRowKernelKind] & 31);
      ++r.rows;
    }
    if (explains.empty()) {
      ++false_positives_;
      if (false_positive_lines_.size() < 20)
        false_positive_lines_.push_back("step " + std::to_string(step_) + " group " + std::to_string(static_cast<int>(group)) +
                                        ": " + format_violation(row));
    }
  }
  // A detection condemns what the fault touched: the engine aborts those requests and drops those
  // cache entries, as an engine acting on its canary would.
  for (auto& f : faults_) {
    if (f.record.detected_step != step_ || f.condemned) continue;
    f.condemned = true;
    for (const auto id : f.requests) condemned_.insert(id);
    for (auto it = cache_.begin(); it != cache_.end();)
      if (f.cache_entries.count(it->second.id)) {
        for (const auto page : it->second.pages) release_page(page);
        free_cache_rows_.push_back(it->second.row);
        it = cache_.erase(it);
      } else {
        ++it;
      }
    for (const ByteFlip& flip : f.flips) repair_flips_.push_back(flip);  // the engine rewrites the padding slot
    if (f.lut_slot >= 0) {
      lut_[f.lut_slot] = f.lut_old;
      f.lut_slot = -1;
      lut_dirty_ = true;
    }
  }
  for (const auto id : batch_) {
    Request* r = request_by_id(id);
    if (r == nullptr) continue;
    tokens_written_ += r->extend;
    if (condemned_.count(id)) {
      finish_request(*r, true);
      continue;
    }
    r->written += r->advance;
    if (r->written >= r->total_len) finish_request(*r, false);
  }
  condemned_.clear();
}

// ---- faults ----

void Engine::schedule_faults() {
  if (options_.faults.empty() || options_.steps < 80) return;
  const std::int64_t per_class = faults_per_class(options_);
  for (const FaultClass c : options_.faults)
    for (std::int64_t k = 0; k < per_class; ++k) schedule_.push_back({uniform(20, options_.steps - 60), c});
  std::sort(schedule_.begin(), schedule_.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.second < b.second; });
}

void Engine::inject_pre_step_faults() {
  for (auto& entry : schedule_)
    if (entry.first >= 0 && entry.first <= step_) {
      const FaultClass c = entry.second;
      const bool pre = c == FaultClass::DoubleAllocation || c == FaultClass::UseAfterFree ||
                       c == FaultClass::PageTableOverwrite || c == FaultClass::SwaLutCorruption ||
                       c == FaultClass::StalePrefixHit || c == FaultClass::FreedRead ||
                       c == FaultClass::CrossIdentityHit;
      if (!pre) continue;
      if (inject(c, 0)) {
        entry.first = -1;
      } else if (step_ >= options_.steps - 60) {
        entry.first = -1;
        ++skipped_[static_cast<int>(c)];
      }
    }
  for (auto& entry : schedule_)  // write-time and model-time faults that found no target in time
    if (entry.first >= 0 && step_ >= options_.steps - 60 && entry.first <= step_) {
      const FaultClass c = entry.second;
      if (c == FaultClass::RogueWrite || c == FaultClass::PositionOffByOne || c == FaultClass::SwappedTokens ||
          c == FaultClass::KvByteFlip || c == FaultClass::StaleMetadata || c == FaultClass::PaddingKv) {
        entry.first = -1;
        ++skipped_[static_cast<int>(c)];
      }
    }
}

bool Engine::inject(FaultClass c, int /*phase*/) {
  if (c == FaultClass::DoubleAllocation && forced_page_ >= 0) return false;
  Fault f;
  f.record.id = static_cast<std::int64_t>(faults_.size());
  f.record.fault = c;
  f.record.step = step_;
  faults_.push_back(std::move(f));
  Fault& fault = faults_.back();
  bool ok = false;
  switch (c) {
    case FaultClass::DoubleAllocation: ok = inject_double_allocation(fault); break;
    case FaultClass::UseAfterFree: ok = inject_use_after_free(fault); break;
    case FaultClass::PageTableOverwrite: ok = inject_page_table_overwrite(fault); break;
    case FaultClass::RogueWrite: ok = inject_rogue_write(fault); break;
    case FaultClass::KvByteFlip: ok = inject_kv_byte_flip(fault); break;
    case FaultClass::PositionOffByOne: ok = inject_position_off_by_one(fault); break;
    case FaultClass::SwappedTokens: ok = inject_swapped_tokens(fault); break;
    case FaultClass::SwaLutCorruption: ok = inject_swa_lut(fault); break;
    case FaultClass::StalePrefixHit: ok = inject_stale_prefix(fault); break;
    case FaultClass::FreedRead: ok = inject_freed_read(fault); break;
    case FaultClass::StaleMetadata: ok = inject_stale_metadata(fault); break;
    case FaultClass::PaddingKv: ok = inject_padding_kv(fault); break;
    case FaultClass::CrossIdentityHit: ok = inject_cross_identity(fault); break;
  }
  if (!ok) {
    faults_.pop_back();
    return false;
  }
  for (const auto id : faults_.back().requests)
    if (Request* r = request_by_id(id)) r->tainted = true;
  return true;
}

Engine::Request* Engine::pick_running(const std::function<bool(const Request&)>& accept) {
  std::vector<Request*> candidates;
  for (auto& [id, r] : running_)
    if (accept(r)) candidates.push_back(&r);
  if (candidates.empty()) return nullptr;
  return candidates[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(candidates.size()) - 1))];
}

namespace {
// Two readers expect the same record at `position` when their tokens agree up to it (same chain).
bool same_record(const std::vector<std::int32_t>& a, std::int64_t pa, const std::vector<std::int32_t>& b, std::int64_t pb) {
  if (pa != pb || pa >= static_cast<std::int64_t>(a.size()) || pb >= static_cast<std::int64_t>(b.size())) return false;
  return std::equal(a.begin(), a.begin() + pa + 1, b.begin());
}
}  // namespace

// A live, fully written page of a request that keeps running: the victim of the allocator bugs.
static bool victim_page(const std::vector<std::int64_t>& pages, std::int64_t written, std::int64_t shared,
                        std::int64_t page_size, const std::vector<std::int64_t>& refs, const std::vector<char>& quarantined,
                        std::int64_t pick, std::int64_t& index) {
  std::vector<std::int64_t> full;
  for (std::int64_t i = shared; i < written / page_size; ++i) {
    const std::int64_t page = pages[static_cast<std::size_t>(i)];
    if (refs[page] == 1 && !quarantined[page]) full.push_back(i);
  }
  if (full.empty()) return false;
  index = full[static_cast<std::size_t>(pick % static_cast<std::int64_t>(full.size()))];
  return true;
}

// The allocator bugs' victim: a live, fully written, unshared page of a request that keeps running,
// quarantined and watched (a write into it destroys the victim's records). Returns the page or -1.
std::int64_t Engine::take_victim_page(Fault& f) {
  std::int64_t index = -1;
  const std::int64_t pick = uniform(0, 1 << 20);
  Request* a = pick_running([&](const Request& r) {
    std::int64_t i;
    return r.total_len - r.written >= kRemainingToPick &&
           victim_page(r.pages, r.written, r.shared_pages, shape_.page_size, page_refs_, quarantined_, pick, i);
  });
  if (a == nullptr) return -1;
  victim_page(a->pages, a->written, a->shared_pages, shape_.page_size, page_refs_, quarantined_, pick, index);
  const std::int64_t page = a->pages[static_cast<std::size_t>(index)];
  quarantined_[page] = 1;
  f.requests.insert(a->id);
  for (std::int64_t o = 0; o < shape_.page_size; ++o) {
    const std::int64_t slot = page * shape_.page_size + o;
    f.record.slots.push_back(slot);
    watches_[slot].push_back({f.record.id, a->id, index * shape_.page_size + o});
    for (int g = 0; g < kGroups; ++g) f.slots[g].insert(g == static_cast<int>(Group::Swa) ? lut_[slot] : slot);
  }
  f.record.note = "page " + std::to_string(page) + " of request " + std::to_string(a->id);
  return page;
}

bool Engine::inject_double_allocation(Fault& f) {
  const std::int64_t page = take_victim_page(f);
  if (page < 0) return false;
  forced_page_ = page;  // the next allocation hands it out again
  forced_fault_ = f.record.id;
  f.record.note += " handed out again";
  return true;
}

bool Engine::inject_use_after_free(Fault& f) {
  const std::int64_t page = take_victim_page(f);
  if (page < 0) return false;
  free_pages_.push_back(page);  // freed while its page table still maps it: the next allocation reuses it
  f.record.note += " freed while mapped";
  return true;
}

// The engine frees a live page of A (the free stage stamps its slots FREED) while A's page table keeps
// it; the page is quarantined, so A's next verify reads the FREED records before any reuse.
bool Engine::inject_freed_read(Fault& f) {
  const std::int64_t page = take_victim_page(f);
  if (page < 0) return false;
  stamp_freed(page);
  for (std::int64_t o = 0; o < shape_.page_size; ++o) {
    const Watch& w = watches_[page * shape_.page_size + o].back();
    f.damage.push_back({w.reader, w.position, now(0), kAllGroups});
  }
  f.record.note += " freed while mapped (stamped FREED, never re-allocated)";
  return true;
}

void Engine::build_backend_metadata() {
  data_.kv_indptr.assign(1, 0);
  data_.kv_indices.clear();
  for (std::int64_t r = 0; r < data_.batch_size; ++r) {
    const std::int64_t rp = data_.req_pool_indices[static_cast<std::size_t>(r)];
    if (rp != 0) {
      const std::int64_t length = std::min(shape_.cols, data_.prefix_lens[static_cast<std::size_t>(r)] +
                                                            std::max<std::int64_t>(0, data_.extend_seq_lens[static_cast<std::size_t>(r)]));
      for (std::int64_t p = 0; p < length; ++p) data_.kv_indices.push_back(req_to_token_[rp * shape_.cols + p]);
    }
    data_.kv_indptr.push_back(static_cast<std::int64_t>(data_.kv_indices.size()));
  }
}

// The backend's copy of A's page-table row keeps a stale entry for one already written position (a slot
// of another live request, or 0 as in vLLM PR #7018) while req_to_token is right: the head's cross-check
// of the copy sees it at once.
bool Engine::inject_stale_metadata(Fault& f) {
  std::vector<std::size_t> rows;
  for (std::size_t b = 0; b < batch_.size(); ++b)
    if (batch_prefix_[b] >= 1) rows.push_back(b);
  if (rows.empty()) return false;
  const std::size_t b = rows[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(rows.size()) - 1))];
  const std::int64_t p = uniform(0, batch_prefix_[b] - 1);
  const auto entry = static_cast<std::size_t>(data_.kv_indptr[b] + p);
  const std::int64_t truth = data_.kv_indices[entry];
  std::int64_t stale = 0;
  if (uniform(0, 3) != 0)
    if (const Request* other = pick_running([&](const Request& r) { return r.id != batch_[b] && r.written >= 1; })) {
      stale = slot_of(*other, uniform(0, other->written - 1));
      if (stale == truth) return false;
    }
  data_.kv_indices[entry] = stale;
  f.record.slots = {truth};
  f.slots[static_cast<int>(Group::Target)].insert(truth);
  f.requests.insert(batch_[b]);
  f.record.exercised_step = step_;  // the head's cross-check reads the copy at once
  f.record.note = "request " + std::to_string(batch_[b]) + " position " + std::to_string(p) + ": kv_indices holds " +
                  std::to_string(stale) + " instead of " + std::to_string(truth);
  return true;
}

bool Engine::inject_page_table_overwrite(Fault& f) {
  Request* a = pick_running([&](const Request& r) { return r.total_len - r.written >= kRemainingToPick && r.written >= 2; });
  if (a == nullptr) return false;
  const std::int64_t p = uniform(0, a->written - 1);
  std::int64_t slot = 0;
  if (uniform(0, 7) == 0) {  // the entry becomes slot 0, the padding slot: verify's slot-zero check (bit 256)
    f.record.note = "request " + std::to_string(a->id) + " position " + std::to_string(p) + " → slot 0";
    f.damage.push_back({a->id, p, now(0), kAllGroups});
  } else {
    Request* b = pick_running([&](const Request& r) { return r.id != a->id && r.written >= 1; });
    if (b == nullptr) return false;
    const std::int64_t q = uniform(0, b->written - 1);
    if (same_record(a->tokens, p, b->tokens, q)) return false;
    slot = slot_of(*b, q);
    f.record.note = "request " + std::to_string(a->id) + " position " + std::to_string(p) + " → slot of request " +
                    std::to_string(b->id) + " position " + std::to_string(q);
    f.damage.push_back({a->id, p, now(0), kAllGroups});
  }
  req_to_token_[a->row * shape_.cols + p] = static_cast<std::int32_t>(slot);
  dirty_rows_.insert(a->row);
  f.record.slots = {slot, slot_of(*a, p)};
  for (int g = 0; g < kGroups; ++g) f.slots[g].insert(g == static_cast<int>(Group::Swa) ? lut_[slot] : slot);
  f.requests.insert(a->id);
  return true;
}

bool Engine::inject_rogue_write(Fault& f) {
  Request* b = pick_running([&](const Request& r) { return r.advance > 0; });
  if (b == nullptr) return false;
  Request* a = pick_running([&](const Request& r) { return r.id != b->id && r.written >= 1; });
  if (a == nullptr) return false;
  const std::int64_t j = uniform(0, b->advance - 1), position = b->written + j, i = b->token_begin + j;
  const std::int64_t ap = uniform(0, a->written - 1), victim = slot_of(*a, ap);
  if (std::find(b->pages.begin(), b->pages.end(), victim / shape_.page_size) != b->pages.end()) return false;
  if (same_record(a->tokens, ap, b->tokens, position)) return false;
  // Never a slot that is a seed or a target of this step's write: SPEC-CANARY §4 leaves that call's
  // outcome open (hold_back_open_writes); another victim is tried at a later step.
  if (step_seeds_.count(victim) || step_targets_.count(victim)) return false;
  auto& target = data_.tokens[static_cast<int>(Group::Target)];
  const std::int64_t intended = target.out_cache_loc[static_cast<std::size_t>(i)];
  target.out_cache_loc[static_cast<std::size_t>(i)] = victim;
  taint_readers(f, victim, now(1), kTargetOnly);  // the victim page may be a shared prefix
  f.damage.push_back({b->id, position, now(1), kTargetOnly});
  f.record.slots = {victim, intended};
  f.slots[0] = {victim, intended};
  f.requests.insert(b->id);
  f.record.note = "request " + std::to_string(b->id) + " position " + std::to_string(position) + " written to slot " +
                  std::to_string(victim) + " instead of " + std::to_string(intended);
  return true;
}

// Every reader of `slot` (running requests whose pages hold it, prefix-cache entries) from now on
// expects a record (or KV bytes) that the fault destroyed there: each is damaged and tainted.
void Engine::taint_readers(Fault& f, std::int64_t slot, std::int64_t time, int groups) {
  const std::int64_t page = slot / shape_.page_size, offset = slot % shape_.page_size;
  for (const auto& [id, r] : running_)
    for (std::size_t i = 0; i < r.pages.size(); ++i)
      if (r.pages[i] == page) {
        const std::int64_t position = static_cast<std::int64_t>(i) * shape_.page_size + offset;
        if (position < r.written) {
          f.damage.push_back({id, position, time, groups});
          f.requests.insert(id);
        }
      }
  for (const auto& [t, entry] : cache_)
    for (std::size_t i = 0; i < entry.pages.size(); ++i)
      if (entry.pages[i] == page) {
        f.damage.push_back({kCacheReader + entry.id, static_cast<std::int64_t>(i) * shape_.page_size + offset, time, groups});
        f.cache_entries.insert(entry.id);
      }
}

bool Engine::inject_kv_byte_flip(Fault& f) {
  const auto& target = data_.tokens[static_cast<int>(Group::Target)];
  ByteFlip flip;
  flip.tensor = static_cast<int>(uniform(0, 1));
  flip.byte = uniform(0, shape_.bytes_per_token - 1);
  flip.mask = static_cast<std::uint8_t>(uniform(1, 255));
  const RealKvMode mode = options_.real_kv;
  if (uniform(0, 3) == 0) {  // a slot this step writes: the tail stamp fingerprints the bad bytes
    std::vector<std::int64_t> written;
    for (const auto slot : target.out_cache_loc)
      if (slot > 0) written.push_back(slot);
    if (written.empty()) return false;
    flip.slot = written[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(written.size()) - 1))];
    f.record.covered = false;
    f.record.note = "flipped before the tail stamp of the same step";
  } else {
    Request* a = pick_running([&](const Request& r) { return r.written >= 1 && r.extend >= 0; });
    if (a == nullptr) return false;
    const std::int64_t p = uniform(0, a->written - 1);
    flip.slot = slot_of(*a, p);
    f.record.covered = mode == RealKvMode::All || (mode == RealKvMode::Partial && flip.byte < 16);
    if (!f.record.covered)
      f.record.note = mode == RealKvMode::None ? "real-KV mode none" : "byte " + std::to_string(flip.byte) + " past PARTIAL's 16";
    taint_readers(f, flip.slot, now(2), kTargetOnly);
  }
  data_.flips.push_back(flip);
  f.record.slots = {flip.slot};
  f.slots[0] = {flip.slot};
  if (f.record.note.empty())
    f.record.note = std::string(flip.tensor == 0 ? "K" : "V") + " byte " + std::to_string(flip.byte) + " of slot " + std::to_string(flip.slot);
  return true;
}

// A CUDA-graph padding row writes undefined K/V into the padding slot (SGLang PR #32477): one byte of slot
// 0's K or V flips after the model's write. The sweep's padding-slot check compares slot 0's fingerprint
// with that of zero bytes (SPEC-CANARY §11.5). Page 0 is never handed out, so its slots stay the fault's.
bool Engine::inject_padding_kv(Fault& f) {
  if (padding_fault_active_) return false;
  ByteFlip flip;
  flip.tensor = static_cast<int>(uniform(0, 1));
  flip.slot = 0;
  flip.byte = uniform(0, shape_.bytes_per_token - 1);
  flip.mask = static_cast<std::uint8_t>(uniform(1, 255));
  const RealKvMode mode = options_.real_kv;
  f.record.covered = mode == RealKvMode::All || (mode == RealKvMode::Partial && flip.byte < 16);
  f.record.note = std::string(flip.tensor == 0 ? "K" : "V") + " byte " + std::to_string(flip.byte) + " of slot 0";
  if (!f.record.covered) {
    f.record.note += mode == RealKvMode::None ? " (real-KV mode none)" : " (past PARTIAL's 16)";
    repair_flips_.push_back(flip);  // nothing can see it: undone at the next step
  }
  data_.flips.push_back(flip);
  f.flips = {flip};
  f.record.slots = {0};
  f.slots[static_cast<int>(Group::Target)] = {0};
  quarantined_[0] = 1;
  padding_fault_active_ = true;
  return true;
}

bool Engine::inject_position_off_by_one(Fault& f) {
  Request* b = pick_running([&](const Request& r) { return r.advance > 0; });
  if (b == nullptr) return false;
  const std::int64_t j = uniform(0, b->advance - 1), i = b->token_begin + j;
  auto& target = data_.tokens[static_cast<int>(Group::Target)];
  target.positions[static_cast<std::size_t>(i)] += 1;
  f.damage.push_back({b->id, b->written + j, now(1), kTargetOnly});
  f.record.exercised_step = step_;  // the write stage's input assert reads it at once
  f.record.slots = {target.out_cache_loc[static_cast<std::size_t>(i)]};
  f.slots[0] = {f.record.slots[0]};
  f.requests = {b->id};
  f.record.note = "request " + std::to_string(b->id) + " position " + std::to_string(b->written + j) + " written as +1";
  return true;
}

bool Engine::inject_swapped_tokens(Fault& f) {
  Request* b = pick_running([&](const Request& r) { return r.advance > 0; });
  if (b == nullptr) return false;
  Request* c = pick_running([&](const Request& r) { return r.advance > 0 && r.id != b->id; });
  if (c == nullptr) return false;
  auto& target = data_.tokens[static_cast<int>(Group::Target)];
  const std::int64_t i = b->token_begin + uniform(0, b->advance - 1), k = c->token_begin + uniform(0, c->advance - 1);
  auto& ids = target.input_ids;
  if (ids[static_cast<std::size_t>(i)] == ids[static_cast<std::size_t>(k)]) return false;
  std::swap(ids[static_cast<std::size_t>(i)], ids[static_cast<std::size_t>(k)]);
  f.damage.push_back({b->id, target.positions[static_cast<std::size_t>(i)], now(1), kTargetOnly});
  f.damage.push_back({c->id, target.positions[static_cast<std::size_t>(k)], now(1), kTargetOnly});
  f.record.exercised_step = step_;
  f.record.slots = {target.out_cache_loc[static_cast<std::size_t>(i)], target.out_cache_loc[static_cast<std::size_t>(k)]};
  f.slots[0] = {f.record.slots[0], f.record.slots[1]};
  f.requests = {b->id, c->id};
  f.record.note = "requests " + std::to_string(b->id) + " and " + std::to_string(c->id);
  return true;
}

bool Engine::inject_swa_lut(Fault& f) {
  if (shape_.swa_window <= 0) return false;
  Request* a = pick_running([&](const Request& r) {
    return r.written >= std::max<std::int64_t>(2, r.prompt_len) && r.total_len - r.written >= kRemainingToPick;
  });
  if (a == nullptr) return false;
  Request* c = pick_running([&](const Request& r) { return r.id != a->id && r.written >= 1; });
  if (c == nullptr) return false;
  const std::int64_t p = a->written - 1, slot = slot_of(*a, p);
  const std::int64_t q = uniform(0, c->written - 1);
  if (same_record(a->tokens, p, c->tokens, q)) return false;
  for (const auto& other : faults_)
    if (other.lut_slot == slot) return false;
  const std::int64_t wrong = lut_[slot_of(*c, q)];
  f.lut_slot = slot;
  f.lut_old = lut_[slot];
  lut_[slot] = wrong;
  lut_dirty_ = true;
  f.damage.push_back({a->id, p, now(0), group_bit(Group::Swa)});
  f.record.slots = {slot};
  f.slots[static_cast<int>(Group::Swa)] = {wrong, f.lut_old};
  f.requests = {a->id};
  f.record.note = "LUT[" + std::to_string(slot) + "] → SWA slot " + std::to_string(wrong) + " of request " + std::to_string(c->id);
  return true;
}

bool Engine::inject_stale_prefix(Fault& f) {
  CacheEntry* entry = nullptr;
  for (auto& [t, e] : cache_) {
    bool clean = !e.stale;
    for (const auto page : e.pages) clean = clean && !quarantined_[page];
    if (clean && (entry == nullptr || uniform(0, 1) == 0)) entry = &e;
  }
  if (entry == nullptr) return false;
  entry->stale = true;  // the index keeps it; its pages go back to the allocator
  f.cache_entries.insert(entry->id);
  for (std::size_t i = 0; i < entry->pages.size(); ++i) {
    const std::int64_t page = entry->pages[i];
    quarantined_[page] = 1;
    free_pages_.push_back(page);
    for (std::int64_t o = 0; o < shape_.page_size; ++o) {
      const std::int64_t slot = page * shape_.page_size + o;
      f.record.slots.push_back(slot);
      const std::int64_t position = static_cast<std::int64_t>(i) * shape_.page_size + o;
      watches_[slot].push_back({f.record.id, kCacheReader + entry->id, position});
      for (auto& [id, r] : running_)  // live requests that share the entry read its pages too
        if (r.cache_entry == entry->id) {
          watches_[slot].push_back({f.record.id, id, position});
          f.requests.insert(id);
        }
      for (int g = 0; g < kGroups; ++g) f.slots[g].insert(g == static_cast<int>(Group::Swa) ? lut_[slot] : slot);
    }
  }
  f.record.note = "prefix-cache entry " + std::to_string(entry->id) + " (" + std::to_string(entry->pages.size()) +
                  " pages) evicted, index kept";
  return true;
}

// vLLM #38606 / SGLang #24568: a request of another identity (a LoRA adapter, a cache salt) whose prompt
// starts with a cached template hits the entry that identity 0 wrote: the cache's key lacked the identity.
// Every position of the hit is read under the wrong identity, so the head verify's chain check (bit 1,
// SPEC-CANARY §11.7) fires on each from the request's first step (it joins this step's batch).
bool Engine::inject_cross_identity(Fault& f) {
  if (!shape_.identities || static_cast<std::int64_t>(running_.size()) >= shape_.max_batch || free_rows_.empty())
    return false;
  const CacheEntry* entry = nullptr;
  for (const auto& [t, e] : cache_) {
    bool clean = !e.stale;
    for (const auto page : e.pages) clean = clean && !quarantined_[page];
    if (clean && (entry == nullptr || uniform(0, 1) == 0)) entry = &e;
  }
  if (entry == nullptr) return false;
  const std::int64_t entry_id = entry->id;
  Request r = make_request(entry->template_id);
  if (r.template_id < 0) {  // a prompt with no token after the template: no hit
    --next_request_id_;
    return false;
  }
  r.identity = uniform(1, std::numeric_limits<std::int32_t>::max());
  const Request* a = admit(std::move(r));
  if (a == nullptr) {
    --next_request_id_;
    return false;
  }
  if (a->cache_entry != entry_id) return false;  // the entry went to make room: a clean request of its own identity
  f.requests.insert(a->id);
  for (std::int64_t p = 0; p < a->written; ++p) f.damage.push_back({a->id, p, now(0), kAllGroups});
  for (std::int64_t i = 0; i < a->shared_pages; ++i)
    for (std::int64_t o = 0; o < shape_.page_size; ++o) {
      const std::int64_t slot = a->pages[static_cast<std::size_t>(i)] * shape_.page_size + o;
      f.record.slots.push_back(slot);
      for (int g = 0; g < kGroups; ++g) f.slots[g].insert(g == static_cast<int>(Group::Swa) ? lut_[slot] : slot);
    }
  f.record.note = "request " + std::to_string(a->id) + " (identity " + std::to_string(a->identity) +
                  ") hit prefix-cache entry " + std::to_string(entry_id) + " (" + std::to_string(a->written) +
                  " tokens of identity 0)";
  return true;
}

// A write landed in a slot some fault watches: the record its readers expect there is gone.
void Engine::note_write(const Request& writer, std::int64_t position, std::int64_t slot, std::int64_t token, int groups) {
  (void)token;
  const auto it = watches_.find(slot);
  if (it == watches_.end()) return;
  for (const Watch& w : it->second) {
    const std::int64_t reader = w.reader, reader_position = w.position;
    if (reader == writer.id) {
      if (reader_position == position) continue;  // its own record, in order
    } else if (reader < kCacheReader) {
      const Request* r = request_by_id(reader);
      if (r == nullptr || reader_position >= r->written || same_record(r->tokens, reader_position, writer.tokens, position)) continue;
    } else {
      bool gone = true, same = false;
      for (const auto& [t, e] : cache_)
        if (kCacheReader + e.id == reader) {
          gone = false;
          same = same_record(templates_[static_cast<std::size_t>(t)], reader_position, writer.tokens, position);
        }
      if (gone || same) continue;
    }
    faults_[static_cast<std::size_t>(w.fault)].damage.push_back({reader, reader_position, now(1), groups});
  }
}

// Ground truth, independent of the canary: did a check this step read a damaged record?
void Engine::mark_exercised() {
  for (auto& f : faults_) {
    if (f.record.exercised_step >= 0) continue;
    if (f.record.fault == FaultClass::PaddingKv && f.record.covered && data_.sweep) {  // the sweep checks slot 0
      f.record.exercised_step = step_;
      continue;
    }
    for (const auto& d : f.damage) {
      bool read = false;
      for (std::size_t b = 0; b < batch_.size() && !read; ++b) {
        if (batch_[b] != d.reader || batch_prefix_[b] <= d.position) continue;
        const bool in_window = shape_.swa_window > 0 && d.position >= batch_prefix_[b] - shape_.swa_window;
        const int head_groups = 1 | (shape_.draft_group ? 2 : 0) | (in_window ? 4 : 0);
        read = (d.time <= now(0) && (d.groups & head_groups)) || (d.time <= now(2) && (d.groups & 1));
      }
      if (data_.sweep && d.reader >= kCacheReader && (d.groups & 1))
        for (const auto& [t, e] : cache_)
          read = read || (kCacheReader + e.id == d.reader && d.position < e.tokens);
      if (read) {
        f.record.exercised_step = step_;
        break;
      }
    }
  }
}

std::set<std::int64_t> Engine::attributable_slots(const Fault& f, Group group, bool aimed_at) const {
  std::set<std::int64_t> slots;
  // After its detection the engine retired what a fault touched: later rows are not its.
  if (f.record.detected_step >= 0 && f.record.detected_step < step_) return slots;
  bool alive = false;
  for (const auto id : f.requests) alive = alive || request_by_id(id) != nullptr;
  for (const auto& [t, e] : cache_) alive = alive || f.cache_entries.count(e.id) > 0;
  // The slots it aimed at, while they are still its: a quarantined page, or a holder still running.
  for (const auto slot : f.slots[static_cast<int>(group)])
    if (alive || (group != Group::Swa && quarantined_[slot / shape_.page_size])) slots.insert(slot);
  if (aimed_at) return slots;
  slots.clear();
  const auto map = [&](std::int64_t slot) { return group == Group::Swa ? lut_[slot] : slot; };
  for (const auto id : f.requests)
    if (const Request* r = request_by_id(id))
      for (std::int64_t p = 0; p < r->written + r->extend && p / shape_.page_size < static_cast<std::int64_t>(r->pages.size()); ++p) {
        slots.insert(map(slot_of(*r, p)));
        slots.insert(map(req_to_token_[r->row * shape_.cols + p]));
      }
  for (const auto& [t, e] : cache_)
    if (f.cache_entries.count(e.id))
      for (const auto page : e.pages)
        for (std::int64_t o = 0; o < shape_.page_size; ++o) slots.insert(map(page * shape_.page_size + o));
  return slots;
}

SimulationReport Engine::report() const {
  SimulationReport report;
  report.options = options_;
  report.steps_run = step_ + 1;
  report.requests_finished = requests_finished_;
  report.requests_aborted = requests_aborted_;
  report.tokens_written = tokens_written_;
  report.rows = rows_;
  report.never_written_rows = never_written_rows_;
  report.false_positives = false_positives_;
  report.false_positive_lines = false_positive_lines_;
  report.ring_overflows = ring_overflows_;
  std::vector<std::int64_t> latencies[kFaultClasses];
  for (const auto& f : faults_) {
    const FaultRecord& r = f.record;
    report.faults.push_back(r);
    ClassSummary& c = report.classes[static_cast<int>(r.fault)];
    ++c.injected;
    c.reason_bits |= r.reason_bits;
    if (!r.covered) ++c.not_covered;
    else if (r.exercised_step < 0) ++c.unexercised;
    if (r.detectable()) {
      ++c.detectable;
      if (r.detected()) {
        ++c.detected;
        latencies[static_cast<int>(r.fault)].push_back(r.detected_step - r.step);
      } else {
        ++c.missed;
      }
    } else if (r.detected()) {
      ++c.caught_anyway;
    }
  }
  for (int k = 0; k < kFaultClasses; ++k) {
    report.classes[k].skipped = skipped_[k];
    auto& l = latencies[k];
    if (l.empty()) continue;
    std::sort(l.begin(), l.end());
    report.classes[k].latency_min = l.front();
    report.classes[k].latency_median = l[l.size() / 2];
    report.classes[k].latency_max = l.back();
  }
  return report;
}

}  // namespace sim
}  // namespace kvcanary
