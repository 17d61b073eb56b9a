# Debian packages of the install rules (cmake/SeqinboxInstall.cmake), one per install component:
#   seqinbox      the program (/usr/bin/seqinbox) and the schema (/usr/share/seqinbox/schema)
#   seqinbox-dev  headers, static libraries and the CMake package config; depends on seqinbox,
#                 whose schema directory the config names
# Build them with `cpack -G DEB` in the build directory (or the `package` target).
include_guard(GLOBAL)

set(SEQINBOX_PACKAGE_MAINTAINER "Seed 5d2ec303 maintainers <maintainers@users.noreply.a-seed-5d2ec303.example>"
  CACHE STRING "Maintainer field of the Debian packages (Name <email>)")

set(CPACK_PACKAGE_NAME seqinbox)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${SEQINBOX_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Sequential inbox for Kafka and PostgreSQL")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_COMPONENTS_ALL program development)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_DEBIAN_PROGRAM_PACKAGE_NAME seqinbox)
# The summary above is each package's synopsis; these are the long descriptions.
set(CPACK_DEBIAN_PROGRAM_DESCRIPTION "The seqinbox program: the relay (seqinbox run) and the commands around it
(housekeep, migrate, status, show, consume, validate, demo...), with the schema scripts under /usr/share/seqinbox/schema.")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME seqinbox-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION "The C++20 library: headers, static libraries and the CMake package config: find_package(seqinbox COMPONENTS ...).")
set(CPACK_COMPONENT_DEVELOPMENT_DEPENDS program)

# Debian 12 packages per optional component: the runtime libraries the program links, and the
# development packages the CMake config of seqinbox-dev finds.
set(_seqinbox_runtime libc6 libgcc-s1 libstdc++6)
set(_seqinbox_development librange-v3-dev)
if(TARGET seqinbox::yaml)
  list(APPEND _seqinbox_runtime libyaml-cpp0.7)
  list(APPEND _seqinbox_development libyaml-cpp-dev)
endif()
if(TARGET seqinbox::postgresql)
  list(APPEND _seqinbox_runtime libsoci-core4.0 libsoci-postgresql4.0 libpq5)
  list(APPEND _seqinbox_development libsoci-dev libpq-dev)
endif()
# The program opens a mariadb:// database with the MariaDB store when the build has it.
if(TARGET seqinbox::mariadb)
  list(APPEND _seqinbox_runtime libsoci-core4.0 libsoci-mysql4.0 libmariadb3)
  list(APPEND _seqinbox_development libsoci-dev libmariadb-dev)
endif()
if(TARGET seqinbox::kafka)
  list(APPEND _seqinbox_runtime librdkafka1)
  list(APPEND _seqinbox_development librdkafka-dev)
endif()
list(REMOVE_DUPLICATES _seqinbox_runtime)
list(REMOVE_DUPLICATES _seqinbox_development)
list(JOIN _seqinbox_development ", " CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS)
# dpkg-shlibdeps (package dpkg-dev) reads the program's dependencies, with versions, off the
# binary; without it the list above stands in.
find_program(SEQINBOX_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(SEQINBOX_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PROGRAM_PACKAGE_SHLIBDEPS ON)
else()
  list(JOIN _seqinbox_runtime ", " CPACK_DEBIAN_PROGRAM_PACKAGE_DEPENDS)
endif()
unset(_seqinbox_runtime)
unset(_seqinbox_development)

include(CPack)
