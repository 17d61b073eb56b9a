# FindRdKafka: librdkafka's C library (Debian ships a pkg-config file, no CMake config).
#
#   find_package(RdKafka [REQUIRED])
#
# Imported target: RdKafka::rdkafka (headers <librdkafka/rdkafka.h>, <librdkafka/rdkafka_mock.h>).
# Result variables: RdKafka_FOUND, RdKafka_INCLUDE_DIR, RdKafka_LIBRARY, RdKafka_VERSION.
include(FindPackageHandleStandardArgs)

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_RdKafka QUIET rdkafka)
endif()
find_path(RdKafka_INCLUDE_DIR NAMES librdkafka/rdkafka.h HINTS ${PC_RdKafka_INCLUDE_DIRS})
find_library(RdKafka_LIBRARY NAMES rdkafka HINTS ${PC_RdKafka_LIBRARY_DIRS})
set(RdKafka_VERSION "${PC_RdKafka_VERSION}")

find_package_handle_standard_args(RdKafka
  REQUIRED_VARS RdKafka_INCLUDE_DIR RdKafka_LIBRARY
  VERSION_VAR RdKafka_VERSION)
mark_as_advanced(RdKafka_INCLUDE_DIR RdKafka_LIBRARY)

if(RdKafka_FOUND AND NOT TARGET RdKafka::rdkafka)
  add_library(RdKafka::rdkafka UNKNOWN IMPORTED)
  set_target_properties(RdKafka::rdkafka PROPERTIES
    IMPORTED_LOCATION "${RdKafka_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${RdKafka_INCLUDE_DIR}")
endif()
