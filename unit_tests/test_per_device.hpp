// Per-device facts of the CUDA path (issue 10): a process that drives several GPUs must get each
// device's own SM count and resident-block counts, not those of the first device it used.

#include "test_support.hpp"

#include <kvcanary/impl/per_device.hpp>

#ifdef KOKKOS_ENABLE_CUDA
#include <kvcanary/impl/entries_cuda.hpp>
#endif

namespace kvcanary_test {

TEST(PerDevice, EachDeviceKeepsItsOwnValueAndIsQueriedOnce) {
  kvcanary::Impl::PerDevice cache;
  int queries = 0;
  const auto sms_of = [&](int device) {
    return cache.get(device, [&] {
      ++queries;
      return 100 + device;
    });
  };
  EXPECT_EQ(sms_of(0), 100);
  EXPECT_EQ(sms_of(1), 101);  // not device 0's value
  EXPECT_EQ(sms_of(7), 107);
  EXPECT_EQ(sms_of(1), 101);
  EXPECT_EQ(sms_of(0), 100);
  EXPECT_EQ(queries, 3);
  EXPECT_EQ(sms_of(kvcanary::Impl::PerDevice::kDevices), 100 + kvcanary::Impl::PerDevice::kDevices);
  EXPECT_EQ(sms_of(kvcanary::Impl::PerDevice::kDevices), 100 + kvcanary::Impl::PerDevice::kDevices);
  EXPECT_EQ(queries, 5);  // past the cache: asked every time, never wrong
}

TEST(PerDevice, AFailedQueryOfZeroIsKept) {
  kvcanary::Impl::PerDevice cache;
  EXPECT_EQ(cache.get(2, [] { return 0; }), 0);
  EXPECT_EQ(cache.get(2, [] { return 5; }), 0);
}

#ifdef KOKKOS_ENABLE_CUDA
TEST(PerDevice, SmCountIsEachVisibleDevicesOwn) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  for (int pass = 0; pass < 2; ++pass)
    for (int device = devices - 1; device >= 0; --device) {  // the last device first, then device 0
      int expected = 0;
      ASSERT_EQ(cudaDeviceGetAttribute(&expected, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
      EXPECT_EQ(kvcanary::Impl::CudaPersistent::sm_count(device), expected) << "device " << device;
    }
}
#endif

}  // namespace kvcanary_test
