# Kokkos Kernels is optional: used (linked, KVCANARY_HAVE_KOKKOSKERNELS) where the user's Kokkos has it,
# never the reason a configure stops (Debian's standalone libkokkos-dev has none). kvcanary needs only
# Kokkos core; with Kokkos Kernels, impl/backend.hpp also checks its GPU test against Kokkos Kernels'.
# -DCMAKE_DISABLE_FIND_PACKAGE_KokkosKernels=ON builds without it even where it is installed.
# Sets KVCanary_WITH_KOKKOSKERNELS (ON/OFF) and KVCanary_KOKKOSKERNELS_TARGET.
set(KVCanary_WITH_KOKKOSKERNELS OFF)
find_package(KokkosKernels QUIET)
if(KokkosKernels_FOUND)
  # Kokkos Kernels' own install exports Kokkos::kokkoskernels; Trilinos' exports KokkosKernels::all_libs.
  foreach(candidate IN ITEMS Kokkos::kokkoskernels KokkosKernels::all_libs)
    if(TARGET ${candidate})
      set(KVCanary_KOKKOSKERNELS_TARGET ${candidate})
      set(KVCanary_WITH_KOKKOSKERNELS ON)
      break()
    endif()
  endforeach()
  if(NOT KVCanary_WITH_KOKKOSKERNELS)
    message(WARNING "kvcanary: KokkosKernels found at ${KokkosKernels_DIR} but it defines neither "
                    "Kokkos::kokkoskernels nor KokkosKernels::all_libs; building without it")
  endif()
endif()
if(KVCanary_WITH_KOKKOSKERNELS)
  message(STATUS "kvcanary: Kokkos Kernels ${KokkosKernels_VERSION} at ${KokkosKernels_DIR} (${KVCanary_KOKKOSKERNELS_TARGET})")
else()
  message(STATUS "kvcanary: without Kokkos Kernels (Kokkos core only)")
endif()
