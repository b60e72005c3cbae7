# Install rules and the CMake package, so another project can
#   find_package(Fathom REQUIRED)
#   target_link_libraries(app PRIVATE Fathom::fathom)
# and include headers exactly as Fathom's own sources do ("core/tensor.h", "fathom.h").
include(CMakePackageConfigHelpers)

set(FATHOM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Fathom)

install(TARGETS fathom EXPORT FathomTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

foreach(layer core kernels autograd nn models parallel zero offload engine)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fathom/${layer}
    FILES_MATCHING PATTERN "*.h")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/fathom.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fathom)

install(EXPORT FathomTargets NAMESPACE Fathom:: DESTINATION ${FATHOM_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/FathomConfig.cmake.in
  ${PROJECT_BINARY_DIR}/FathomConfig.cmake
  INSTALL_DESTINATION ${FATHOM_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/FathomConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/FathomConfig.cmake ${PROJECT_BINARY_DIR}/FathomConfigVersion.cmake
  DESTINATION ${FATHOM_INSTALL_CMAKEDIR})
