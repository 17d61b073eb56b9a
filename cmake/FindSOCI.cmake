# FindSOCI: SOCI's core, PostgreSQL backend and (when found) MySQL backend (Debian ships neither
# a CMake config nor a pkg-config file for SOCI 4.0).
#
#   find_package(SOCI [REQUIRED])
#
# Imported targets:
#   SOCI::soci_core        libsoci_core, headers <soci/...>
#   SOCI::soci_postgresql  libsoci_postgresql and libpq (its header includes <libpq-fe.h>);
#                          links SOCI::soci_core
#   SOCI::soci_mysql       libsoci_mysql and the MariaDB client library (its header includes
#                          <mysql.h> and <errmsg.h>, in /usr/include/mariadb); defined only when
#                          both are found (SOCI_MYSQL_FOUND)
# Result variables: SOCI_FOUND, SOCI_INCLUDE_DIR, SOCI_VERSION, SOCI_MYSQL_FOUND.
# Hints: SOCI_ROOT (CMake's <Package>_ROOT), PostgreSQL is looked up with FindPostgreSQL.
include(FindPackageHandleStandardArgs)

find_path(SOCI_INCLUDE_DIR NAMES soci/soci.h)
find_library(SOCI_CORE_LIBRARY NAMES soci_core)
find_library(SOCI_POSTGRESQL_LIBRARY NAMES soci_postgresql)
find_package(PostgreSQL QUIET)  # libpq and /usr/include/postgresql
find_library(SOCI_MYSQL_LIBRARY NAMES soci_mysql)
find_path(SOCI_MARIADB_INCLUDE_DIR NAMES mysql.h PATH_SUFFIXES mariadb mysql)
find_library(SOCI_MARIADB_LIBRARY NAMES mariadb mysqlclient)

if(SOCI_INCLUDE_DIR AND EXISTS "${SOCI_INCLUDE_DIR}/soci/version.h")
  file(STRINGS "${SOCI_INCLUDE_DIR}/soci/version.h" _soci_version REGEX "^#define SOCI_VERSION [0-9]+")
  if(_soci_version MATCHES "SOCI_VERSION ([0-9]+)")
    # SOCI_VERSION is major * 100000 + minor * 100 + patch
    math(EXPR _soci_major "${CMAKE_MATCH_1} / 100000")
    math(EXPR _soci_minor "${CMAKE_MATCH_1} / 100 % 1000")
    math(EXPR _soci_patch "${CMAKE_MATCH_1} % 100")
    set(SOCI_VERSION "${_soci_major}.${_soci_minor}.${_soci_patch}")
  endif()
  unset(_soci_version)
  unset(_soci_major)
  unset(_soci_minor)
  unset(_soci_patch)
endif()

find_package_handle_standard_args(SOCI
  REQUIRED_VARS SOCI_INCLUDE_DIR SOCI_CORE_LIBRARY SOCI_POSTGRESQL_LIBRARY PostgreSQL_FOUND
  VERSION_VAR SOCI_VERSION)
mark_as_advanced(SOCI_INCLUDE_DIR SOCI_CORE_LIBRARY SOCI_POSTGRESQL_LIBRARY SOCI_MYSQL_LIBRARY SOCI_MARIADB_INCLUDE_DIR
                 SOCI_MARIADB_LIBRARY)
set(SOCI_MYSQL_FOUND FALSE)
if(SOCI_FOUND AND SOCI_MYSQL_LIBRARY AND SOCI_MARIADB_INCLUDE_DIR AND SOCI_MARIADB_LIBRARY)
  set(SOCI_MYSQL_FOUND TRUE)
endif()

if(SOCI_FOUND)
  if(NOT TARGET SOCI::soci_core)
    add_library(SOCI::soci_core UNKNOWN IMPORTED)
    set_target_properties(SOCI::soci_core PROPERTIES
      IMPORTED_LOCATION "${SOCI_CORE_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${SOCI_INCLUDE_DIR}"
      # Debian's libsoci does not export the typeinfo of its internal classes, which UBSan's
      # vptr check references from code using SOCI's headers (a no-op without -fsanitize).
      INTERFACE_COMPILE_OPTIONS "$<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-fno-sanitize=vptr>")
  endif()
  if(NOT TARGET SOCI::soci_postgresql)
    add_library(SOCI::soci_postgresql UNKNOWN IMPORTED)
    set_target_properties(SOCI::soci_postgresql PROPERTIES
      IMPORTED_LOCATION "${SOCI_POSTGRESQL_LIBRARY}"
      INTERFACE_LINK_LIBRARIES "SOCI::soci_core;PostgreSQL::PostgreSQL")
  endif()
  if(SOCI_MYSQL_FOUND AND NOT TARGET SOCI::soci_mysql)
    add_library(SOCI::soci_mysql UNKNOWN IMPORTED)
    set_target_properties(SOCI::soci_mysql PROPERTIES
      IMPORTED_LOCATION "${SOCI_MYSQL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${SOCI_MARIADB_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES "SOCI::soci_core;${SOCI_MARIADB_LIBRARY}")
  endif()
endif()
