// Strided tables (issue 10): engines pad their page tables, or hand over a column range of a wider one.
// The kernels must honour the row stride of req_to_token and of the pool, and validate() must reject
// with std::invalid_argument any layout they cannot read (a column stride other than 1, rows that
// overlap). Each table is embedded in a wider one whose other columns hold a poison value, so a read
// through the wrong stride shows up as a wrong slot or token.

#include "test_random_cases.hpp"
#include "test_support.hpp"

namespace kvcanary_test {

class StridedTables : public PlanTest<KVCANARY_TEST_EXECSPACE> {
 protected:
  using Table = Kokkos::View<std::int32_t**, Kokkos::LayoutRight, memory_space>;
  using Strided = kvcanary::PlanInputs<memory_space>::Matrix<std::int32_t>;
  static constexpr std::int32_t kOutside = 55555;  // in the wider table, never in the embedded one

  // `values` (rows x cols, row-major) as columns [first_col, first_col + cols) of a device table of
  // rows x (first_col + cols + extra_cols); the returned View is a column range of it (row stride > cols).
  static Strided embedded(const std::vector<std::int32_t>& values, std::int64_t rows, std::int64_t cols,
                          std::int64_t first_col, std::int64_t extra_cols) {
    const std::int64_t width = first_col + cols + extra_cols;
    Table wide(Kokkos::view_alloc(Kokkos::WithoutInitializing, "test::wide_table"), rows, width);
    auto host = Kokkos::create_mirror_view(wide);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < width; ++c) {
        const std::int64_t k = c - first_col;
        host(r, c) = (k >= 0 && k < cols) ? values[static_cast<std::size_t>(r * cols + k)] : kOutside;
      }
    Kokkos::deep_copy(wide, host);
    return Kokkos::subview(wide, Kokkos::ALL, std::make_pair(first_col, first_col + cols));
  }

  // The library's plan of `host` with both tables embedded, from poisoned outputs.
  Outputs plan_embedded(const Inputs& host, const Capacities& caps, std::int64_t first_col,
                        std::int64_t extra_cols) const {
    const execution_space space;
    kvcanary::PlanInputs<memory_space> in = kvcanary::upload_inputs(space, host);
    in.req_to_token = embedded(host.req_to_token, host.max_reqs, host.max_seq_len, first_col, extra_cols);
    if (host.req_to_verify_expected_tokens)
      in.req_to_verify_expected_tokens =
          embedded(*host.req_to_verify_expected_tokens, host.pool_rows, host.pool_cols, first_col, extra_cols);
    const DevicePlan<execution_space> device(space, poisoned(caps), batch_size(host));
    device.plan(space, in, options());
    return device.download(space);
  }

  void expect_same_as_reference(const Inputs& host, const Capacities& caps, std::int64_t first_col,
                                std::int64_t extra_cols) const {
    Outputs reference = poisoned(caps);
    kvcanary::reference::plan(host, reference);
    EXPECT_TRUE(same_plan(plan_embedded(host, caps, first_col, extra_cols), reference));
  }

  // A rejected call's message (empty when the call was accepted), outputs checked untouched.
  std::string rejection(const Strided& req_to_token, std::optional<Strided> pool = std::nullopt) const {
    const execution_space space;
    Inputs host = linear(4, 8);
    set_pool(host, 4, 8, {8});
    set_batch(host, {1}, {3}, {1});
    kvcanary::PlanInputs<memory_space> in = kvcanary::upload_inputs(space, host);
    in.req_to_token = req_to_token;
    if (pool) in.req_to_verify_expected_tokens = *pool;
    const DevicePlan<execution_space> device(space, poisoned({}), 1);
    const auto message = invalid_argument_message([&] { device.plan(space, in, options()); });
    if (message) EXPECT_EQ(device.download(space).verify_num_valid, static_cast<std::int32_t>(kPoison));
    return message.value_or("");
  }
};

TEST_P(StridedTables, ColumnRangeOfAWiderTableIsReadThroughItsRowStride) {
  // Issue 10's case: a 3 x 8 table cut to its first 4 columns; row 1 is 8 9 10 11, not 4 5 6 7.
  const Inputs wide = linear(3, 8);
  Inputs host = linear(3, 4);
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t c = 0; c < 4; ++c)
      host.req_to_token[static_cast<std::size_t>(r * 4 + c)] = wide.req_to_token[static_cast<std::size_t>(r * 8 + c)];
  set_batch(host, {1}, {3}, {1});
  const Outputs out = plan_embedded(host, {16, 1}, 0, 4);
  EXPECT_EQ(head(out.verify_slot_indices, 3), (Int64s{8, 9, 10}));
  EXPECT_EQ(out.write_seed_slot_indices, (Int64s{10}));
  expect_same_as_reference(host, {16, 1}, 0, 4);
}

TEST_P(StridedTables, PaddedPoolAndTableAgreeWithTheReference) {
  Inputs host = linear(4, 16);
  set_pool(host, 4, 16, {16, 5, 16, 2});
  host.full_to_swa_index_mapping = shifted_lut(64, 100);
  host.swa_window_size = 6;
  host.kv_token_id_vs_position_offset = 1;
  set_batch(host, {1, 2, 3, 0}, {16, 9, 3, 7}, {1, 2, 0, 1});
  expect_same_as_reference(host, {64, 4}, 3, 5);
  expect_same_as_reference(host, {64, 4}, 0, 1);
}

TEST_P(StridedTables, RandomCasesAgreeWithTheReferenceAtAnyRowStride) {
  CaseGenerator generator(20261203);
  for (int k = 0; k < 150; ++k) {
    const RandomCase c = generator.next();
    SCOPED_TRACE("case " + std::to_string(k));
    expect_same_as_reference(c.inputs, c.capacities, k % 4, 1 + k % 7);
  }
}

TEST_P(StridedTables, ExplicitRowStrideOfUnmanagedMatrix) {
  Inputs host = linear(3, 4);
  set_batch(host, {2}, {4}, {1});
  // Rows 6 elements apart over caller-owned memory: row 2 starts at element 12.
  Kokkos::View<std::int32_t*, memory_space> buffer("test::buffer", 18);
  auto values = Kokkos::create_mirror_view(buffer);
  for (std::int64_t i = 0; i < 18; ++i) values(i) = static_cast<std::int32_t>(i % 6 < 4 ? (i / 6) * 4 + i % 6 : kOutside);
  Kokkos::deep_copy(buffer, values);
  const execution_space space;
  kvcanary::PlanInputs<memory_space> in = kvcanary::upload_inputs(space, host);
  in.req_to_token = kvcanary::unmanaged_matrix<memory_space>(buffer.data(), 3, 4, 6);
  const DevicePlan<execution_space> device(space, poisoned({16, 1}), 1);
  device.plan(space, in, options());
  Outputs reference = poisoned({16, 1});
  kvcanary::reference::plan(host, reference);
  EXPECT_TRUE(same_plan(device.download(space), reference));
}

TEST_P(StridedTables, ColumnMajorTablesAreRejected) {
  Kokkos::View<std::int32_t**, Kokkos::LayoutLeft, memory_space> left("test::left", 4, 8);
  const std::string message = rejection(left);
  EXPECT_THAT(message, ::testing::HasSubstr("req_to_token has column stride 4, must be 1"));
  Kokkos::View<std::int32_t**, Kokkos::LayoutRight, memory_space> right("test::right", 4, 8);
  EXPECT_THAT(rejection(right, Strided(left)), ::testing::HasSubstr("req_to_verify_expected_tokens has column stride"));
}

TEST_P(StridedTables, OverlappingRowsAreRejected) {
  Kokkos::View<std::int32_t*, memory_space> buffer("test::buffer", 64);
  const Strided overlapping(buffer.data(), Kokkos::LayoutStride(4, 5, 8, 1));
  EXPECT_THAT(rejection(overlapping), ::testing::HasSubstr("req_to_token has row stride 5 but 8 columns"));
}

TEST_P(StridedTables, OneColumnOrOneRowIsReadableInAnyLayout) {
  // A single column has no column stride to honour, a single row no row stride.
  Kokkos::View<std::int32_t**, Kokkos::LayoutLeft, memory_space> column("test::column", 4, 1);
  EXPECT_EQ(rejection(column), "");
  Kokkos::View<std::int32_t**, Kokkos::LayoutLeft, memory_space> row("test::row", 1, 8);
  EXPECT_EQ(rejection(Kokkos::View<std::int32_t**, Kokkos::LayoutRight, memory_space>("test::rtt", 4, 8), Strided(row)),
            "");
}

KVCANARY_INSTANTIATE_OVER_ALGORITHMS(StridedTables);

}  // namespace kvcanary_test
