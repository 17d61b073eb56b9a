# Install rules for every component registered by seqinbox_add_component() (global property
# SEQINBOX_COMPONENTS), their headers, schema/<store>/*.sql, the package config files and the seqinbox
# program. Two install components, one Debian package each (cmake/SeqinboxPackage.cmake):
# `program` (bin/seqinbox and the schema) and `development` (everything a C++ consumer needs).
#
# Each component gets its own export set seqinboxTargets-<name> and file
# seqinbox-<name>-targets.cmake, so find_package(seqinbox COMPONENTS <name>) loads only that
# component, the components it links to, and their external packages. Adding a component needs
# no change here: seqinbox_add_component() is enough, provided every external imported target it
# links to has an entry in the table below (configuration fails loudly otherwise).
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set(SEQINBOX_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/seqinbox"
  CACHE STRING "Where the seqinbox package config files are installed (relative to the prefix)")
set(SEQINBOX_INSTALL_SCHEMADIR "${CMAKE_INSTALL_DATADIR}/seqinbox/schema"
  CACHE STRING "Where schema/<store>/*.sql is installed (relative to the prefix)")

# Imported target a component links to -> arguments of find_package() in seqinboxConfig.cmake.
# One line per external package; e.g. for the compiled components to come:
#   SOCI::soci_core "SOCI CONFIG", PostgreSQL::PostgreSQL "PostgreSQL",
#   RdKafka::rdkafka++ "RdKafka CONFIG", yaml-cpp::yaml-cpp "yaml-cpp CONFIG".
set(_seqinbox_package_of_range-v3::range-v3 "range-v3 CONFIG")
set(_seqinbox_package_of_Threads::Threads "Threads")
set(_seqinbox_package_of_yaml-cpp "yaml-cpp CONFIG")  # Debian's yaml-cpp 0.7 names its target yaml-cpp
set(_seqinbox_package_of_SOCI::soci_postgresql "SOCI")  # cmake/FindSOCI.cmake; links SOCI::soci_core
set(_seqinbox_package_of_SOCI::soci_mysql "SOCI")       # the same module, when it found the MySQL backend
set(_seqinbox_package_of_RdKafka::rdkafka "RdKafka")  # cmake/FindRdKafka.cmake
set(_seqinbox_package_of_nlohmann_json::nlohmann_json "nlohmann_json CONFIG")

# A package found through one of our find modules (cmake/Find<name>.cmake) needs that module at
# the consumer too: it is installed beside the config, in modules/, and seqinboxConfig.cmake puts
# that directory on CMAKE_MODULE_PATH only while it looks for its dependencies.
function(_seqinbox_find_modules_of packages out)
  set(modules "")
  foreach(package IN LISTS packages)
    separate_arguments(args UNIX_COMMAND "${package}")
    list(GET args 0 name)
    if(EXISTS "${PROJECT_SOURCE_DIR}/cmake/Find${name}.cmake")
      list(APPEND modules "${PROJECT_SOURCE_DIR}/cmake/Find${name}.cmake")
    endif()
  endforeach()
  set(${out} "${modules}" PARENT_SCOPE)
endfunction()

# seqinbox components (out_components) and find_package() argument strings (out_packages)
# the installed target of component `name` needs. Private dependencies of static libraries
# appear as $<LINK_ONLY:...> and are needed too; other build-only entries are skipped.
function(_seqinbox_component_requirements name out_components out_packages)
  get_target_property(links seqinbox_${name} INTERFACE_LINK_LIBRARIES)
  if(NOT links)
    set(links "")
  endif()
  set(components "")
  set(packages "")
  foreach(link IN LISTS links)
    if(link MATCHES "^\\$<LINK_ONLY:(.+)>$")
      set(link "${CMAKE_MATCH_1}")
    endif()
    if(link MATCHES "^\\$<BUILD_(LOCAL_)?INTERFACE:")
      continue()  # not part of the installed interface
    endif()
    if(link MATCHES "^seqinbox(::|_)(.+)$")
      set(dep "${CMAKE_MATCH_2}")
      get_property(known GLOBAL PROPERTY SEQINBOX_COMPONENTS)
      if(dep IN_LIST known)
        list(APPEND components ${dep})
        continue()
      endif()
    endif()
    if(DEFINED _seqinbox_package_of_${link})
      list(APPEND packages "${_seqinbox_package_of_${link}}")
    elseif(TARGET ${link})
      get_target_property(imported ${link} IMPORTED)
      if(imported)
        message(FATAL_ERROR "seqinbox component '${name}' links to '${link}': add the package that "
          "provides it to the table in cmake/SeqinboxInstall.cmake "
          "(set(_seqinbox_package_of_${link} \"<find_dependency arguments>\")).")
      else()
        message(FATAL_ERROR "seqinbox component '${name}' links to the non-installed target "
          "'${link}'; link it as $<BUILD_INTERFACE:${link}> or make it a component.")
      endif()
    elseif(link MATCHES "^\\$<")
      message(FATAL_ERROR "seqinbox component '${name}': cannot tell which package provides "
        "link entry '${link}'; teach cmake/SeqinboxInstall.cmake about it.")
    endif()
    # Anything else is a plain library name or flag (e.g. "dl", "-pthread"): nothing to find.
  endforeach()
  list(REMOVE_DUPLICATES components)
  list(REMOVE_DUPLICATES packages)
  set(${out_components} "${components}" PARENT_SCOPE)
  set(${out_packages} "${packages}" PARENT_SCOPE)
endfunction()

get_property(_seqinbox_components GLOBAL PROPERTY SEQINBOX_COMPONENTS)
if(NOT "core" IN_LIST _seqinbox_components)
  message(FATAL_ERROR "SeqinboxInstall: the core component must be defined before the install rules")
endif()

# Component table for seqinboxConfig.cmake; components are listed dependencies first so the
# config can load them in this order.
set(_seqinbox_ordered "")
set(_seqinbox_modules "")
set(_seqinbox_pending ${_seqinbox_components})
while(_seqinbox_pending)
  set(_seqinbox_progress FALSE)
  foreach(_seqinbox_c IN LISTS _seqinbox_pending)
    _seqinbox_component_requirements(${_seqinbox_c} _seqinbox_deps _seqinbox_pkgs)
    set(_seqinbox_ready TRUE)
    foreach(_seqinbox_d IN LISTS _seqinbox_deps)
      if(NOT _seqinbox_d IN_LIST _seqinbox_ordered)
        set(_seqinbox_ready FALSE)
      endif()
    endforeach()
    if(_seqinbox_ready)
      list(APPEND _seqinbox_ordered ${_seqinbox_c})
      list(REMOVE_ITEM _seqinbox_pending ${_seqinbox_c})
      set(_seqinbox_progress TRUE)
      string(APPEND SEQINBOX_CONFIG_COMPONENT_TABLE
        "set(_seqinbox_${_seqinbox_c}_components \"${_seqinbox_deps}\")\n"
        "set(_seqinbox_${_seqinbox_c}_packages \"${_seqinbox_pkgs}\")\n")
      _seqinbox_find_modules_of("${_seqinbox_pkgs}" _seqinbox_modules_of_c)
      list(APPEND _seqinbox_modules ${_seqinbox_modules_of_c})
    endif()
  endforeach()
  if(NOT _seqinbox_progress)
    message(FATAL_ERROR "SeqinboxInstall: cyclic dependencies between components ${_seqinbox_pending}")
  endif()
endwhile()
set(SEQINBOX_CONFIG_COMPONENTS "${_seqinbox_ordered}")
list(REMOVE_DUPLICATES _seqinbox_modules)
if(_seqinbox_modules)
  install(FILES ${_seqinbox_modules} DESTINATION ${SEQINBOX_INSTALL_CMAKEDIR}/modules COMPONENT development)
endif()

foreach(_seqinbox_c IN LISTS _seqinbox_components)
  install(TARGETS seqinbox_${_seqinbox_c} EXPORT seqinboxTargets-${_seqinbox_c}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT development
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT seqinboxTargets-${_seqinbox_c}
    NAMESPACE seqinbox::
    FILE seqinbox-${_seqinbox_c}-targets.cmake
    DESTINATION ${SEQINBOX_INSTALL_CMAKEDIR}
    COMPONENT development)
  # Public headers only live in the include dir (private ones stay in src/), so install it all.
  get_property(_seqinbox_dir GLOBAL PROPERTY SEQINBOX_COMPONENT_${_seqinbox_c}_INCLUDE_DIR)
  file(REAL_PATH "${_seqinbox_dir}" _seqinbox_dir)  # a symlinked dir would be installed as the link
  install(DIRECTORY "${_seqinbox_dir}/" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} OPTIONAL
    COMPONENT development)
endforeach()

# Schema scripts, one folder per store (schema/postgresql/*.sql, schema/mariadb/*.sql); the
# directory is created even when there are none, so that seqinbox_SCHEMA_DIR always names an
# existing directory.
install(DIRECTORY DESTINATION ${SEQINBOX_INSTALL_SCHEMADIR} COMPONENT program)
install(DIRECTORY "${PROJECT_SOURCE_DIR}/schema/" DESTINATION ${SEQINBOX_INSTALL_SCHEMADIR} COMPONENT program
  FILES_MATCHING PATTERN "*.sql")

# The seqinbox program (apps/seqinbox), when this build makes it.
if(TARGET seqinbox_cli)
  install(TARGETS seqinbox_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT program)
endif()

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/seqinboxConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/seqinboxConfig.cmake"
  INSTALL_DESTINATION ${SEQINBOX_INSTALL_CMAKEDIR}
  PATH_VARS SEQINBOX_INSTALL_SCHEMADIR)
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/seqinboxConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/seqinboxConfig.cmake"
  "${PROJECT_BINARY_DIR}/seqinboxConfigVersion.cmake"
  DESTINATION ${SEQINBOX_INSTALL_CMAKEDIR}
  COMPONENT development)

foreach(_seqinbox_v IN ITEMS components ordered modules modules_of_c pending progress c deps pkgs ready d dir v)
  unset(_seqinbox_${_seqinbox_v})
endforeach()
