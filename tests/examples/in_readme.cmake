# Fails unless the content of EXAMPLE appears verbatim in README.
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(FIND "${readme}" "${example}" position)
if(position EQUAL -1)
  message(FATAL_ERROR "${EXAMPLE} is not in ${README} verbatim: copy the file into the README's usage section")
endif()
