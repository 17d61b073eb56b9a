# Warning and sanitizer flags for seqinbox's own targets (never forced on consumers).
add_library(seqinbox_project_options INTERFACE)
target_compile_options(seqinbox_project_options INTERFACE -Wall -Wextra -Wpedantic
  $<$<BOOL:${SEQINBOX_WERROR}>:-Werror>)
if(SEQINBOX_SANITIZE)
  target_compile_options(seqinbox_project_options INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(seqinbox_project_options INTERFACE -fsanitize=address,undefined)
endif()
