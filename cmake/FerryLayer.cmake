# ferry_layer(NAME DIR DEPS...) makes the static library ferry_<NAME> from every .cc below src/<DIR>.
# Files named *_avx2.cc are the AVX2/FMA/F16C translation units, *_avx512.cc the AVX-512 (F/BW/VL/DQ/VNNI) ones
# *_avx512bf16.cc those that also use AVX512_BF16 and *_amx.cc those that also use the AMX tiles: only they get those flags, and code reaches
# them through run-time dispatch (include/ferry/core/cpu_features.h), so one binary runs on any x86-64; other
# CPUs build without them (FerryOptions.cmake, FERRY_X86_KERNELS). Files below a cuda/ folder are built only with
# the CUDA backend.

# ferry_isa_sources(LIST_VAR): gives the files of ${LIST_VAR} named *_avx2.cc, *_avx512.cc, *_avx512bf16.cc, *_amx.cc their ISA
# flags on x86-64 and removes them from the list elsewhere (FERRY_X86_KERNELS off).
function(ferry_isa_sources list_var)
  set(srcs ${${list_var}})
  if(NOT FERRY_X86_KERNELS)
    list(FILTER srcs EXCLUDE REGEX "_(avx2|avx512|avx512bf16|amx)\\.cc$")
    set(${list_var} ${srcs} PARENT_SCOPE)
    return()
  endif()
  foreach(f ${srcs})
    if(f MATCHES "_avx2\\.cc$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    elseif(f MATCHES "_avx512\\.cc$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni")
    elseif(f MATCHES "_avx512bf16\\.cc$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16")
    elseif(f MATCHES "_amx\\.cc$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mamx-tile;-mamx-bf16;-mamx-int8")
    endif()
  endforeach()
endfunction()

function(ferry_layer NAME DIR)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${DIR}/*.cc)
  file(GLOB_RECURSE cuda_srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${DIR}/*.cu)
  list(FILTER srcs EXCLUDE REGEX "/cuda/")
  if(FERRY_LAYER_EXCLUDE)  # files another target builds (regex on the path)
    list(FILTER srcs EXCLUDE REGEX "${FERRY_LAYER_EXCLUDE}")
  endif()
  ferry_isa_sources(srcs)
  file(GLOB_RECURSE cuda_cc CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${DIR}/cuda/*.cc)
  if(FERRY_HAVE_CUDA)
    list(APPEND srcs ${cuda_srcs} ${cuda_cc})
  endif()
  if(NOT srcs)  # a layer with no sources yet is an interface target, so the layers above still link
    add_library(ferry_${NAME} INTERFACE)
    target_include_directories(ferry_${NAME} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                       $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(ferry_${NAME} INTERFACE ${ARGN})
    return()
  endif()
  add_library(ferry_${NAME} STATIC ${srcs})
  target_include_directories(ferry_${NAME} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
                                         PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(ferry_${NAME} PUBLIC ${ARGN} PRIVATE ferry_options)
endfunction()

# ferry_test(LAYER DEPS...) makes one GoogleTest executable per layer from tests/<LAYER>/*_test.cc.
function(ferry_test LAYER)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/${LAYER}/*.cc)
  if(NOT srcs)
    return()
  endif()
  ferry_isa_sources(srcs)  # test helpers named like the library's ISA files are built the same way
  add_executable(ferry_${LAYER}_tests ${srcs})
  target_include_directories(ferry_${LAYER}_tests PRIVATE ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(ferry_${LAYER}_tests PRIVATE ${ARGN} ferry_test_support GTest::gtest_main GTest::gmock ferry_options)
  target_compile_definitions(ferry_${LAYER}_tests PRIVATE
    FERRY_SOURCE_DIR="${PROJECT_SOURCE_DIR}" FERRY_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(ferry_${LAYER}_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${LAYER})
endfunction()
