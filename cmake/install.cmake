# cmake --install: the headers under include/gradlab/ (with the umbrella gradlab.h), the static
# libraries, the gradlab binary, and a CMake package that finds them again:
#   find_package(gradlab CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE gradlab::gradlab)
# Every path in the package is relative to the prefix, so an installed tree can be moved.
include(CMakePackageConfigHelpers)

# io/hdf5/ and train/io/checkpoint_* are the file code's inside: their headers include HDF5's,
# which an installed gradlab does not need.
install(DIRECTORY autograd nn data io train interp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gradlab
  FILES_MATCHING PATTERN "*.h"
  PATTERN hdf5 EXCLUDE
  PATTERN checkpoint_sections.h EXCLUDE
  PATTERN checkpoint_checks.h EXCLUDE)
install(FILES gradlab.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gradlab)

install(TARGETS gradlab_autograd gradlab_nn gradlab_data gradlab_io gradlab_train gradlab_interp
  gradlab_library
  EXPORT gradlabTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS gradlab RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(gradlab_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/gradlab)
install(EXPORT gradlabTargets NAMESPACE gradlab:: DESTINATION ${gradlab_package_dir})
configure_package_config_file(cmake/gradlabConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gradlabConfig.cmake
  INSTALL_DESTINATION ${gradlab_package_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gradlabConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gradlabConfig.cmake
  ${PROJECT_BINARY_DIR}/gradlabConfigVersion.cmake
  DESTINATION ${gradlab_package_dir})

# The Python package (python/CMakeLists.txt): the extension module, the pure-Python files and the
# report's bundle, which gradlab.vis inlines into its notebook views.
if(GRADLAB_PYTHON)
  install(TARGETS gradlab_python LIBRARY DESTINATION ${GRADLAB_PYTHON_INSTALL_DIR}/gradlab)
  install(DIRECTORY python/gradlab/ DESTINATION ${GRADLAB_PYTHON_INSTALL_DIR}/gradlab
    FILES_MATCHING PATTERN "*.py")
  install(FILES ${GRADLAB_REPORT_BUNDLE_DIR}/report.js ${GRADLAB_REPORT_BUNDLE_DIR}/report.css
    DESTINATION ${GRADLAB_PYTHON_INSTALL_DIR}/gradlab/web)
endif()
