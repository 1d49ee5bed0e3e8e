# Warning and sanitizer flags shared by every ferry target (applied through the ferry_options interface target).
add_library(ferry_options INTERFACE)
target_compile_options(ferry_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>)
if(FERRY_WERROR)
  target_compile_options(ferry_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
if(FERRY_SANITIZE)
  target_compile_options(ferry_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(ferry_options INTERFACE -fsanitize=address,undefined)
endif()
