# Warning and sanitizer flags for seqinbox's own targets (never forced on consumers).
add_library(seqinbox_project_options INTERFACE)
target_compile_options(seqinbox_project_options INTERFACE -Wall -Wextra -Wpedantic
  $<$<BOOL:${SEQINBOX_WERROR}>:-Werror>
  # librdkafka's RD_KAFKA_V_* argument macros are GNU statement expressions, which clang's
  # -Wpedantic reports at every producev() call.
  $<$<CXX_COMPILER_ID:Clang>:-Wno-gnu-statement-expression-from-macro-expansion>)
if(SEQINBOX_SANITIZE)
  target_compile_options(seqinbox_project_options INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(seqinbox_project_options INTERFACE -fsanitize=address,undefined)
endif()
