# Installs the library, its headers and a relocatable KVCanaryConfig.cmake exporting KVCanary::kvcanary.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KVCanary_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/KVCanary)

install(TARGETS kvcanary EXPORT KVCanaryTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/kvcanary DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/kvcanary/version.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvcanary)
install(EXPORT KVCanaryTargets NAMESPACE KVCanary:: DESTINATION ${KVCanary_INSTALL_CMAKEDIR})

configure_package_config_file(cmake/KVCanaryConfig.cmake.in
  ${PROJECT_BINARY_DIR}/KVCanaryConfig.cmake
  INSTALL_DESTINATION ${KVCanary_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/KVCanaryConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/KVCanaryConfig.cmake ${PROJECT_BINARY_DIR}/KVCanaryConfigVersion.cmake
  DESTINATION ${KVCanary_INSTALL_CMAKEDIR})
