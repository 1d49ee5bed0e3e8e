# `cmake --install` (components Development and Runtime; the wheel installs only `python`): headers, the static
# libraries, the `ferry` command, a CMake package (find_package(ferry CONFIG) gives ferry::ferry, which carries every
# dependency), and a pkg-config file (ferry.pc). CPack makes a .deb of the same tree whose Depends are the Debian 12
# packages the installed headers, libraries and binary need.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FERRY_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ferry)
# Every library src/CMakeLists.txt defines (the layers, ferry_generate and the `ferry` interface target), in
# definition order (lower layers first), so a new layer is installed and exported without a change here.
get_property(_ferry_libs DIRECTORY ${PROJECT_SOURCE_DIR}/src PROPERTY BUILDSYSTEM_TARGETS)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ferry DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development)
install(TARGETS ferry_options ${_ferry_libs} EXPORT ferryTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET ferry_cli)
  install(TARGETS ferry_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
endif()
install(EXPORT ferryTargets NAMESPACE ferry:: DESTINATION ${FERRY_CMAKE_DIR} COMPONENT Development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ferryConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/ferryConfig.cmake INSTALL_DESTINATION ${FERRY_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ferryConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ferryConfig.cmake ${PROJECT_BINARY_DIR}/ferryConfigVersion.cmake
        DESTINATION ${FERRY_CMAKE_DIR} COMPONENT Development)

# pkg-config: static libraries, so every library and dependency is in Libs (upper layers first).
set(FERRY_PC_LIBS "")
set(_ferry_pc_order ${_ferry_libs})
list(REVERSE _ferry_pc_order)
foreach(lib ${_ferry_pc_order})
  get_target_property(_type ${lib} TYPE)
  if(_type STREQUAL "STATIC_LIBRARY")
    string(APPEND FERRY_PC_LIBS " -l${lib}")
  endif()
endforeach()
# Libraries the layers link by path (OpenBLAS from find_package(BLAS)), and CUDA's.
set(FERRY_PC_EXTRA "")
foreach(lib ${_ferry_libs})
  get_target_property(_links ${lib} LINK_LIBRARIES)
  foreach(l ${_links})
    if(IS_ABSOLUTE "${l}" AND NOT FERRY_PC_EXTRA MATCHES " ${l}")
      string(APPEND FERRY_PC_EXTRA " ${l}")
    endif()
  endforeach()
endforeach()
if(FERRY_HAVE_MPI)
  foreach(l ${FERRY_MPI_LIBRARIES})
    string(APPEND FERRY_PC_EXTRA " ${l}")
  endforeach()
endif()
if(FERRY_HAVE_CUDA)
  string(APPEND FERRY_PC_EXTRA " -L${CUDAToolkit_LIBRARY_DIR} -lcublas -lcudart")
  set(FERRY_PC_CFLAGS " -DFERRY_HAVE_CUDA=1 -I${CUDAToolkit_INCLUDE_DIRS}")
endif()
# Relocatable: the prefix is found from the .pc file's own folder, so `cmake --install --prefix DIR` and the .deb agree.
file(RELATIVE_PATH FERRY_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" FERRY_PC_TO_PREFIX "${FERRY_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ferry.pc.in ${PROJECT_BINARY_DIR}/ferry.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ferry.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT Development)

# CPack: one .deb (headers, static libraries, CMake and pkg-config files, the `ferry` binary). Depends: the -dev
# packages a consumer compiles against, as Debian 12 names them, plus the runtime libraries the `ferry` binary links
# as dpkg-shlibdeps finds them (libraries no package provides, such as a CUDA toolkit in /usr/local/cuda, are skipped).
set(CPACK_GENERATOR DEB)
set(CPACK_COMPONENTS_ALL Development Runtime)  # not the wheel's `python` component
set(CPACK_PACKAGE_NAME ferry)
set(CPACK_PACKAGE_VENDOR "ferry")
set(CPACK_PACKAGE_CONTACT "ferry maintainers <ferry@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "big-model inference: Accelerate's big-model API as a C++20 library and CLI")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_COMPRESSION_TYPE zstd)  # dpkg >= 1.21.18 (Debian 12) reads zstd; xz takes minutes on 300 MB
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libfmt-dev (>= 9), nlohmann-json3-dev (>= 3.10), libzip-dev, liburing-dev, libpcre2-dev, libutf8proc-dev, \
libopenblas-dev, pkg-config")
if(FERRY_HAVE_MPI)  # the process group (core/process_group.h)
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libopenmpi-dev")
endif()
if(FERRY_HAVE_CUDA)
  # The CUDA runtime is not a Debian 12 package: a CUDA build needs NVIDIA's CUDA 13 toolkit installed as well.
  set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
      "Built with the CUDA backend: needs NVIDIA's CUDA 13 runtime (libcudart, libcublas) in \
${CUDAToolkit_LIBRARY_DIR}.")
endif()
include(CPack)
