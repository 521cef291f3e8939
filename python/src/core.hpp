#ifndef KVCANARY_PY_CORE_HPP
#define KVCANARY_PY_CORE_HPP

// The Kokkos-free interface between the nanobind module (module.cpp: argument checks, errors) and the
// Kokkos layer (core.cpp: unmanaged Views over these pointers, execution spaces, launches). Everything here
// is plain data: pointers the caller owns, extents, strides. module.cpp checks every rule of the Python
// boundary before it fills one of these; core.cpp adds the library's own validate() (std::invalid_argument).

#include <cstdint>
#include <string>
#include <vector>

namespace kvcanary {
namespace python {

// Where a call runs: host memory on a host backend, or CUDA memory of one device on a stream.
enum class Backend : int { Default = 0, Serial = 1, OpenMP = 2, Cuda = 3 };

struct Place {
  Backend backend = Backend::Default;  // Default: the build's default host backend for host memory
  bool cuda = false;                   // the arrays live in CUDA device memory
  int device_id = 0;
  std::uintptr_t stream = 0;  // cudaStream_t of a CUDA call
};

template <class T>
struct Vec {
  T* data = nullptr;
  std::int64_t size = 0;
};

// A row-major matrix whose rows start row_stride elements apart.
template <class T>
struct Mat {
  T* data = nullptr;
  std::int64_t rows = 0, cols = 0, row_stride = 0;
};

struct PlanArgs {
  Vec<const std::int64_t> req_pool_indices, prefix_lens, extend_seq_lens;
  Mat<const std::int32_t> req_to_token;
  int swa_window_size = 0;
  bool has_lut = false;
  Vec<const std::int64_t> lut;
  bool has_pool = false;
  Mat<const std::int32_t> pool;
  bool has_valid_lens = false;
  Vec<const std::int64_t> valid_lens;
  int kv_token_id_vs_position_offset = 0;
  // SPEC-CANARY §11.7: req_identities in, the plans' verify_identities / write_identities out; each
  // passed as given (the library's validate() refuses one without the others).
  bool has_identities = false, has_verify_identities = false, has_write_identities = false;
  Vec<const std::int64_t> identities;
  Vec<std::int64_t> verify_identities, write_identities;
  // outputs
  Vec<std::int64_t> verify_slot_indices, verify_expected_tokens, verify_expected_positions, verify_prev_slot_indices;
  std::int32_t* verify_num_valid = nullptr;
  std::int32_t* enable = nullptr;
  Vec<std::int64_t> write_offsets, write_seed_slot_indices;
  std::int32_t* write_num_valid_reqs = nullptr;
  std::int32_t* input_error_bits = nullptr;
  std::int32_t* first_bad_row = nullptr;
  Vec<std::int64_t> workspace;  // verify_offsets scratch, max_batch_size + 1 entries
  int algorithm = 0;            // 0 default, 1 portable, 2 cuda-persistent
};

struct BufferArgs {
  void* data = nullptr;
  std::int64_t num_slots = 0, stride_bytes = 32;
};

struct RingArgs {
  std::int64_t* rows = nullptr;  // [capacity][8]
  std::int64_t capacity = 0;
  std::int64_t* count = nullptr;
  std::int64_t* slot_run_counter = nullptr;
  std::int64_t* kernel_run_counter = nullptr;
};

struct SourceArgs {
  const std::uint8_t* data = nullptr;
  std::int64_t pages = 0, row_bytes = 0, row_stride_bytes = 0;
  std::int64_t page_size = 1, bytes_per_token = 16, read_bytes = 16;
};

struct RealKvArgs {
  int mode = 0;  // 0 none, 1 partial, 2 all
  std::vector<SourceArgs> sources;
};

struct VerifyPlanArgs {
  Vec<const std::int64_t> slot_indices, expected_tokens, expected_positions, prev_slot_indices;
  const std::int32_t* num_valid = nullptr;
  const std::int32_t* enable = nullptr;
  bool has_identities = false;  // SPEC-CANARY §11.7
  Vec<const std::int64_t> identities;
};

// One canary buffer of a verify() or write() call, with its launch tag and real-KV sources.
struct TargetArgs {
  BufferArgs buffer;
  int kernel_kind = 0;
  RealKvArgs real_kv;
};

struct VerifyArgs {
  VerifyPlanArgs plan;
  std::vector<TargetArgs> targets;
  RingArgs ring;
  bool check_expected_token = true;
  bool check_slot_zero = true;  // SPEC-CANARY §11.3
  bool check_freed = true;      // SPEC-CANARY §11.2
  int algorithm = 0;  // 0 default, 1 portable, 2 cuda
};

struct WriteArgs {
  Vec<const std::int64_t> write_offsets, write_seed_slot_indices;
  const std::int32_t* write_num_valid_reqs = nullptr;
  bool has_identities = false;  // SPEC-CANARY §11.7
  Vec<const std::int64_t> write_identities;
  bool index_int32 = false;  // the token arrays hold int32 (else int64)
  Vec<const void> input_ids, positions, out_cache_loc;
  bool has_expected = false;
  Vec<const void> expected_input_ids, expected_positions;
  const std::int32_t* chain_position_assert = nullptr;
  std::vector<TargetArgs> targets;  // 1 to 4 buffers sharing the plan and the tokens (K and V)
  RingArgs ring;
  int algorithm = 0;
};

// A copy of a ring taken at the step boundary (copies and waits).
struct RingSnapshot {
  std::vector<std::int64_t> rows;  // capacity * 8
  std::int64_t capacity = 0, count = 0, slot_run_counter = 0, kernel_run_counter = 0;
};

// ---- lifecycle (every call checks; nothing reaches a Kokkos abort) ----
struct InitOptions {
  int device_id = -1;    // CUDA device; -1: none asked (host builds) / the current device
  int num_threads = -1;  // host threads; -1: the environment's
};
void initialize(const InitOptions& options);  // throws std::runtime_error after finalize or on a bad device
bool is_initialized();
bool is_finalized();
void finalize();  // idempotent; later calls of anything else throw
std::vector<std::string> backends();
bool built_with_cuda();
std::string kokkos_version();
int initialized_device();  // the CUDA device Kokkos was initialized on (-1 on host builds)
bool stream_is_capturing(std::uintptr_t stream, int device_id);
// Creates (outside capture only) the execution-space instance of a CUDA stream; a no-op on host builds.
void prepare_stream(int device_id, std::uintptr_t stream);

// ---- stages (asynchronous on CUDA; host backends have finished when they return) ----
void plan(const Place& place, const PlanArgs& args);
void verify(const Place& place, const VerifyArgs& args);
void write(const Place& place, const WriteArgs& args);
RingSnapshot read_ring(const Place& place, const RingArgs& ring);

// The SPEC-CANARY §7 report of a snapshot: kept rows (8 each), their lines, and the counts.
struct Report {
  std::vector<std::int64_t> rows;
  std::vector<std::string> lines;
  std::int64_t count = 0, capacity = 0, lost_to_overflow = 0, first_row = 0, rows_read = 0, dropped = 0;
  std::int64_t newly_lost = 0;
  std::vector<std::int64_t> dropped_launch_tags;
  std::int64_t slot_run_counter = 0, kernel_run_counter = 0;
  bool overflowed = false;
  std::string summary;
};
Report make_report(const RingSnapshot& snapshot, std::int64_t already_reported, bool keep_never_written);
std::string format_row(const std::int64_t row[8]);

}  // namespace python
}  // namespace kvcanary

#endif
