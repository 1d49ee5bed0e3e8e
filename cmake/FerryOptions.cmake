# Warning and sanitizer flags shared by every ferry target (applied through the ferry_options interface target).
add_library(ferry_options INTERFACE)
target_compile_options(ferry_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>)
if(FERRY_WERROR)
  target_compile_options(ferry_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
if(FERRY_SANITIZE)
  # -O1 -g1 (after the build type's -O2 -g, so they win): what AddressSanitizer recommends, and each translation
  # unit compiles ~40% faster (tests/models/config_test.cc: 34.6 s at -O2 -g, 21.1 s at -O1 -g1 on the 2-core VM);
  # -g1 keeps the line tables the reports need.
  target_compile_options(ferry_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
                              -O1 -g1>)
  target_link_options(ferry_options INTERFACE -fsanitize=address,undefined)
endif()

# The x86 kernels (files named *_avx2.cc, *_avx512.cc, *_avx512bf16.cc, *_amx.cc, chosen at run time by cpu_isa()) are built
# only for x86-64. On other CPUs (aarch64: Graviton, Ampere, Apple silicon under Linux) those files are left out,
# FERRY_X86_KERNELS is undefined and every op runs its portable C++ path (scripts/cross-check builds and tests that
# under qemu).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(FERRY_X86_KERNELS ON)
  target_compile_definitions(ferry_options INTERFACE FERRY_X86_KERNELS=1)
else()
  set(FERRY_X86_KERNELS OFF)
endif()
