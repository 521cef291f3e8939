# KVCanary_BACKENDS: the Kokkos backends this build has, in kvcanary's names (serial, openmp, cuda).
# The unit tests and perf_tests build one executable per entry.
set(KVCanary_BACKENDS)
foreach(backend IN ITEMS SERIAL OPENMP CUDA)
  if(Kokkos_ENABLE_${backend})
    string(TOLOWER ${backend} name)
    list(APPEND KVCanary_BACKENDS ${name})
  endif()
endforeach()
