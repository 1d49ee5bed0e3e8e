# FERRY_PYTHON=AUTO|ON|OFF: the Python extension module ferry._ferry (python/, nanobind), built in this tree next to
# the library so the pytest suite runs against the same objects. AUTO builds it when the interpreter (Python_EXECUTABLE;
# scripts/setup passes the .venv's) has its development headers and the nanobind package, and skips it in the
# sanitizer and fuzz builds; ON requires it; OFF never builds it. scikit-build-core (pyproject.toml) sets ON.
set(FERRY_PYTHON AUTO CACHE STRING "Build the Python extension module: AUTO, ON or OFF")
set_property(CACHE FERRY_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(FERRY_HAVE_PYTHON OFF)
if(FERRY_PYTHON STREQUAL "ON" OR (FERRY_PYTHON STREQUAL "AUTO" AND NOT FERRY_SANITIZE AND NOT FERRY_BUILD_FUZZ))
  if(FERRY_PYTHON STREQUAL "ON")
    find_package(Python 3.9 COMPONENTS Interpreter Development.Module REQUIRED)
  else()
    find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
  endif()
  if(Python_FOUND)
    execute_process(COMMAND "${Python_EXECUTABLE}" -m nanobind --cmake_dir
                    OUTPUT_VARIABLE _ferry_nb_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _ferry_nb_rc ERROR_QUIET)
    if(_ferry_nb_rc EQUAL 0)
      find_package(nanobind CONFIG PATHS "${_ferry_nb_dir}" NO_DEFAULT_PATH)
    endif()
  endif()
  if(Python_FOUND AND nanobind_FOUND)
    set(FERRY_HAVE_PYTHON ON)
  elseif(FERRY_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "FERRY_PYTHON=ON but ${Python_EXECUTABLE} has no nanobind package "
                        "(pip install nanobind, or run scripts/venv and pass -DPython_EXECUTABLE=.venv/bin/python)")
  endif()
endif()
if(FERRY_HAVE_PYTHON)
  message(STATUS "ferry: Python module ON (${Python_EXECUTABLE}, nanobind ${nanobind_VERSION})")
else()
  message(STATUS "ferry: Python module OFF")
endif()
