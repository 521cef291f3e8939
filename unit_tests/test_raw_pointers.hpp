// Engines own their device buffers: PlanInputs, VerifyPlan and WritePlan can wrap raw pointers as
// unmanaged Views, and plan() runs on them exactly as on Views it allocated.

#include "test_support.hpp"

#include <memory>

namespace kvcanary_test {

class RawPointers : public PlanTest<KVCANARY_TEST_EXECSPACE> {
 protected:
  // Device allocations made the way a caller outside Kokkos' View machinery would, freed with the test.
  template <class T>
  T* allocate(std::size_t n) {
    void* p = Kokkos::kokkos_malloc<memory_space>("test::caller_buffer", (n > 0 ? n : 1) * sizeof(T));
    buffers_.emplace_back(p, [](void* q) { Kokkos::kokkos_free<memory_space>(q); });
    return static_cast<T*>(p);
  }

  template <class T>
  T* device_copy(const std::vector<T>& values) {
    T* p = allocate<T>(values.size());
    Kokkos::View<T*, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> device(p, values.size());
    Kokkos::deep_copy(device, Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                                  values.data(), values.size()));
    return p;
  }

 private:
  std::vector<std::unique_ptr<void, void (*)(void*)>> buffers_;
};

TEST_P(RawPointers, PlanRunsOnCallerOwnedBuffers) {
  Inputs host = linear(4, 16);
  set_pool(host, 4, 16, {16, 0, 3, 9});
  host.full_to_swa_index_mapping = shifted_lut(64, 1000);
  host.swa_window_size = 4;
  host.kv_token_id_vs_position_offset = 1;
  set_batch(host, {1, 0, 2, 3}, {3, 9, 6, 0}, {1, 1, 2, 5});
  const Capacities caps{16, 6};

  using Inputs_ = kvcanary::PlanInputs<memory_space>;
  Inputs_ in;
  in.req_pool_indices = Inputs_::Vector<std::int64_t>(device_copy(host.req_pool_indices), 4);
  in.prefix_lens = Inputs_::Vector<std::int64_t>(device_copy(host.prefix_lens), 4);
  in.extend_seq_lens = Inputs_::Vector<std::int64_t>(device_copy(host.extend_seq_lens), 4);
  in.req_to_token = kvcanary::unmanaged_matrix<memory_space>(device_copy(host.req_to_token), 4, 16);
  in.swa_window_size = host.swa_window_size;
  in.kv_token_id_vs_position_offset = host.kv_token_id_vs_position_offset;
  in.full_to_swa_index_mapping = Inputs_::Vector<std::int64_t>(device_copy(*host.full_to_swa_index_mapping), 64);
  in.req_to_verify_expected_tokens =
      kvcanary::unmanaged_matrix<memory_space>(device_copy(*host.req_to_verify_expected_tokens), 4, 16);
  in.req_to_verify_expected_tokens_valid_lens =
      Inputs_::Vector<std::int64_t>(device_copy(*host.req_to_verify_expected_tokens_valid_lens), 4);

  using Array = Kokkos::View<std::int64_t*, memory_space>;
  using Scalar = Kokkos::View<std::int32_t, memory_space>;
  const auto array = [&](std::size_t n) { return Array(allocate<std::int64_t>(n), n); };
  const auto scalar = [&] { return Scalar(allocate<std::int32_t>(1)); };
  kvcanary::VerifyPlan<memory_space> verify{array(16), array(16), array(16), array(16), scalar(), scalar()};
  kvcanary::WritePlan<memory_space> write{array(7), array(6), scalar()};
  kvcanary::PlanStatus<memory_space> status{scalar(), scalar()};
  kvcanary::PlanWorkspace<memory_space> workspace{array(5)};

  const execution_space space;
  kvcanary::upload_outputs(space, poisoned(caps), verify, write, status);
  kvcanary::plan(space, in, verify, write, status, workspace, options());
  Outputs library;
  kvcanary::download_outputs(space, verify, write, status, library);

  Outputs reference = poisoned(caps);
  kvcanary::reference::plan(host, reference);
  EXPECT_TRUE(same_plan(library, reference));
  EXPECT_TRUE(follows_write_rules(library, 4));
  EXPECT_EQ(library.verify_num_valid, 7);
  EXPECT_EQ(head(library.verify_slot_indices, 7), (Int64s{1016, 1017, 1018, 1034, 1035, 1036, 1037}));
}

KVCANARY_INSTANTIATE_OVER_ALGORITHMS(RawPointers);

}  // namespace kvcanary_test
