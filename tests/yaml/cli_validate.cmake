# cmake -DSEQINBOX=<program> -DFILES=<tests/yaml/files> -DWORK_DIR=<dir> -DREADME=<adapters/yaml/README.md> -P cli_validate.cmake
# `seqinbox validate`: exit codes, stdout and stderr for valid, invalid and unreadable files.
cmake_minimum_required(VERSION 3.25)

# run(<expected exit code> ARGS ... [OUT regex...] [ERR regex...] [NOT_OUT regex...])
# (square brackets would merge list elements, so the regexes match them with '.')
function(run code)
  cmake_parse_arguments(arg "" "" "ARGS;OUT;ERR;NOT_OUT" ${ARGN})
  execute_process(COMMAND "${SEQINBOX}" validate ${arg_ARGS} WORKING_DIRECTORY "${FILES}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(context "seqinbox validate ${arg_ARGS}\n--- stdout\n${out}--- stderr\n${err}")
  if(NOT rc STREQUAL "${code}")
    message(FATAL_ERROR "exit ${rc}, expected ${code}: ${context}")
  endif()
  foreach(re IN LISTS arg_OUT)
    if(NOT out MATCHES "${re}")
      message(FATAL_ERROR "stdout does not match '${re}': ${context}")
    endif()
  endforeach()
  foreach(re IN LISTS arg_ERR)
    if(NOT err MATCHES "${re}")
      message(FATAL_ERROR "stderr does not match '${re}': ${context}")
    endif()
  endforeach()
  foreach(re IN LISTS arg_NOT_OUT)
    if(out MATCHES "${re}")
      message(FATAL_ERROR "stdout unexpectedly matches '${re}': ${context}")
    endif()
  endforeach()
endfunction()

# Valid, built-in names only: summary with the release graph in topological order.
run(0 ARGS valid/topics_and_clusters.yaml
  OUT "^valid/topics_and_clusters.yaml: valid, 1 sequence\n"
      "sequence S \\(retention 24h, maxWaiting 10000 \\(the default\\), dead-letter-newest, 3 types\\)\n"
      "  1\\. OrderCreated: immediately; context id key \\(if missing: handle by default, dead-letter in seqinbox run\\), topic orders, cluster main\n"
      "  2\\. Payment\\.CARD: after OrderCreated; context id key \\([^)]*\\), topic payments, cluster finance\n"
      "  3\\. Payment\\.INVOICE: after OrderCreated"
      "subtype resolver of Payment: header:payment-kind \\('CARD', 'INVOICE'\\)\n")
run(0 ARGS valid/or_with_harmless_cycle.yaml
  OUT "  1\\. Start: immediately[^\n]*\n  2\\. X: any_of\\(after Start, after Y\\)[^\n]*\n  3\\. Y: after X")
run(0 ARGS valid/nested_conditions.yaml
  OUT "  4\\. D: all_of\\(after A, any_of\\(after B, all_of\\(after C, any_of\\(after A, after B\\)\\)\\)\\)")

# Names the program does not know: errors, unless assumed (then listed once).
run(1 ARGS valid/subtypes_across_sequences.yaml
  ERR "valid/subtypes_across_sequences.yaml:2:19: unknown subtype resolver 'validation-kind'"
      "valid/subtypes_across_sequences.yaml:8:29: unknown context id extractor 'order-id'"
      "valid/subtypes_across_sequences.yaml:11:29: unknown context id extractor 'order-id'"
      "3 problems found\n$"
  NOT_OUT "valid")
run(0 ARGS --assume-registered valid/subtypes_across_sequences.yaml valid/two_sequences.yaml
  OUT "sequence OrderSequence \\(retention 24h, maxWaiting 10000 \\(the default\\), dead-letter-newest, 2 types\\)\n  1\\. OrderCreated: immediately; context id order-id \\(if missing: handle by default, dead-letter in seqinbox run\\)\n"
      "sequence ReturnSequence \\(retention P7D, maxWaiting 10000 \\(the default\\), dead-letter-newest, 2 types\\)"
      "assumed registered: order-id \\(valid/subtypes_across_sequences.yaml:8:29\\)\nassumed registered: validation-kind"
      "valid/two_sequences.yaml: valid, 2 sequences\n"
      "2\\. OrderShipped: after OrderCreated; context id json:/order/id"
      "assumed registered: only-sequenced \\(valid/two_sequences.yaml:7:24\\)")

# Every problem of every file on stderr, exit 1.
run(1 ARGS valid/topics_and_clusters.yaml several_problems.yaml invalid/never_released.yaml
  OUT "^valid/topics_and_clusters.yaml: valid"
  ERR "several_problems.yaml:3:22: sequence 'S': malformed retention period '1 day'"
      "several_problems.yaml:6:29: unknown context id extractor 'nope'"
      "several_problems.yaml:7:9: sequence 'S': type 'B': predecessor 'Z' is not declared"
      "several_problems.yaml:9:9: sequence 'S': type 'B': unknown key 'toppic' \\(did you mean 'topic'\\?"
      "several_problems.yaml:11:9: sequence 'S': type 'A': declared twice"
      "invalid/never_released.yaml:7:9: sequence 'S': types 'B', 'C' can never be released: cycle B -> C -> B"
      "6 problems found\n$")
run(1 ARGS invalid/not_utf8.yaml ERR "invalid/not_utf8.yaml:2:12: the file is not valid UTF-8")

# JSON summary.
run(0 ARGS --json valid/or_with_harmless_cycle.yaml
  OUT "^\\{\"files\": .\\{\"file\": \"valid/or_with_harmless_cycle.yaml\", \"valid\": true, \"errors\": .., "
      "\"sequences\": .\\{\"name\": \"S\", \"retention\": \"90s\", \"retention_seconds\": 90, "
      "\"buffer\": \\{\"max_waiting\": 10000, \"declared\": false, \"overflow_policy\": \"dead-letter-newest\"\\}, \"numbering\": null, \"release_order\": .\\{\"type\": \"Start\""
      "\\{\"type\": \"X\", \"subtype\": \"\", \"qualified_type\": \"X\", \"release\": \"any_of\\(after Start, after Y\\)\", "
      "\"context_id_extractor\": \"key\", \"sequence_number_extractor\": null, \"missing_context_id\": \\{\"declared\": null, \"library\": \"handle\", \"relay\": \"dead-letter\"\\}, \"message_filter\": null, \"topic\": \"\", \"cluster\": \"\"\\}"
      "\"assumed\": ..\\}.\\}\n$")
run(0 ARGS valid/recording_until.yaml
  OUT "sequence OrderSequence \\(retention 24h, recording until 2026-12-01T01:30:00.5\\+01:30, maxWaiting 10000 \\(the default\\), dead-letter-newest, 1 type\\)")
run(0 ARGS --json valid/recording_until.yaml
  OUT "\"recording_until\": \"2026-12-01T01:30:00.5\\+01:30\"\\}, \\{\"name\": \"ReturnSequence\""
      "\"recording_until\": null\\}")
run(1 ARGS --json --assume-registered invalid/empty_node.yaml
  OUT "\"valid\": false, \"errors\": .\"invalid/empty_node.yaml:9:27: sequence 'S': type 'B': empty release condition node"
  ERR "invalid/empty_node.yaml:9:27:")

# Each type's policy for a missing context id: as declared, else the library's and the relay's defaults.
run(0 ARGS valid/missing_context_id.yaml
  OUT "  1\\. A: immediately; context id key \\(if missing: dead-letter\\)\n"
      "  2\\. B: after A; context id key \\(if missing: handle\\)\n"
      "  3\\. C: after B; context id key \\(if missing: handle by default, dead-letter in seqinbox run\\)\n")
run(0 ARGS --json valid/missing_context_id.yaml
  OUT "\"qualified_type\": \"A\", [^}]*\"missing_context_id\": \\{\"declared\": \"dead-letter\", \"library\": \"dead-letter\", \"relay\": \"dead-letter\"\\}"
      "\"qualified_type\": \"B\", [^}]*\"missing_context_id\": \\{\"declared\": \"handle\", \"library\": \"handle\", \"relay\": \"handle\"\\}"
      "\"qualified_type\": \"C\", [^}]*\"missing_context_id\": \\{\"declared\": null, \"library\": \"handle\", \"relay\": \"dead-letter\"\\}")

# Bounded buffers: maxWaiting and overflowPolicy as declared, in the summary; bad values refused where written.
run(0 ARGS valid/bounded_buffer.yaml
  OUT "sequence OrderSequence \\(retention 24h, maxWaiting 500, reject, 2 types\\)"
      "sequence ReturnSequence \\(retention 7d, maxWaiting 10000 \\(the default\\), dead-letter-instance, 1 type\\)")
run(0 ARGS --json valid/bounded_buffer.yaml
  OUT "\"buffer\": \\{\"max_waiting\": 500, \"declared\": true, \"overflow_policy\": \"reject\"\\}")
run(1 ARGS invalid/bad_buffer.yaml
  ERR "invalid/bad_buffer.yaml:4:17: sequence 'S': 'maxWaiting' must be a whole number from 1 to 1000000, got '0'"
      "invalid/bad_buffer.yaml:5:21: sequence 'S': unknown overflowPolicy 'drop'; expected dead-letter-newest, dead-letter-instance or reject"
      "invalid/bad_buffer.yaml:10:17: sequence 'T': 'maxWaiting' must be a whole number from 1 to 1000000, got '2000000'"
      "invalid/bad_buffer.yaml:17:17: sequence 'U': 'maxWaiting' must be a whole number from 1 to 1000000, got '-3'"
      "invalid/bad_buffer.yaml:18:5: sequence 'U': unknown key 'maxWaitng' \\(did you mean 'maxWaiting'\\?"
      "5 problems found\n$")

# Numbered sequences: extractors, first number, gap timeout and policy in the summary; bad values refused where written.
run(0 ARGS valid/numbered.yaml
  OUT "sequence AccountLedger \\(retention 7d, maxWaiting 10000 \\(the default\\), dead-letter-newest, 2 types\\)\n"
      "  numbered by header:seq, json:/seq, first number 0, gap timeout 10m, policy skip\n"
      "  1\\. Deposited: by number header:seq; context id key [^\n]*\n  2\\. Withdrawn: by number json:/seq; context id key"
      "sequence Telemetry \\([^)]*\\)[^\n]*\n  numbered by key, first number first seen, gap timeout none, policy hold\n"
      "  1\\. Reading: by number key;"
      "sequence Orders \\([^\n]*\n  1\\. OrderCreated: immediately;"
  NOT_OUT "sequence Orders[^\n]*\n  numbered")
run(0 ARGS --json valid/numbered.yaml
  OUT "\"numbering\": \\{\"extractors\": .\"header:seq\", \"json:/seq\"., \"first_number\": 0, \"gap_timeout\": \"10m\", \"gap_timeout_seconds\": 600, \"gap_policy\": \"skip\"\\}"
      "\"release\": \"by number header:seq\", \"context_id_extractor\": \"key\", \"sequence_number_extractor\": \"header:seq\""
      "\"numbering\": \\{\"extractors\": .\"key\"., \"first_number\": null, \"gap_timeout\": null, \"gap_timeout_seconds\": null, \"gap_policy\": \"hold\"\\}"
      "\"name\": \"Orders\", \"retention\": \"24h\", \"retention_seconds\": 86400, \"buffer\": \\{[^}]*\\}, \"numbering\": null")
run(1 ARGS invalid/bad_numbering.yaml
  ERR "invalid/bad_numbering.yaml:4:18: sequence 'S': 'firstNumber' must be a whole number from 0 to 9223372036854775807 or first-seen, got '-1'"
      "invalid/bad_numbering.yaml:5:17: sequence 'S': gap timeout '0s' must be positive, not zero"
      "invalid/bad_numbering.yaml:6:16: sequence 'S': unknown gapPolicy 'drop'; expected hold, skip or dead-letter"
      "invalid/bad_numbering.yaml:19:25: unknown sequence number extractor 'nope'"
      "10 problems found\n$")
run(1 ARGS --assume-registered invalid/bad_numbering.yaml invalid/numbering_misdeclared.yaml
  ERR "invalid/bad_numbering.yaml:14:17: sequence 'T': malformed gap timeout '5 minutes'"
      "invalid/numbering_misdeclared.yaml:8:9: sequence 'Mixed': a sequence number is declared by 'A' but not by 'B'"
      "invalid/numbering_misdeclared.yaml:22:5: sequence 'Forgotten': numbering is set \\(first number first seen, gap timeout 3600s\\)"
      "13 problems found\n$")

# Usage errors and unreadable files: exit 2.
run(2 ERR "seqinbox validate: no FILE given")
run(2 ARGS --bogus valid/two_sequences.yaml ERR "unknown option '--bogus'")
run(2 ARGS valid/two_sequences.yaml does-not-exist.yaml ERR "cannot read does-not-exist.yaml")
run(2 ARGS invalid ERR "cannot read invalid")
run(0 ARGS --help OUT "usage: seqinbox validate .--assume-registered. .--json. FILE")
# The example of adapters/yaml/README.md stays valid.
file(READ "${README}" readme)
string(REGEX MATCH "```yaml\n([^`]*)```" _ "${readme}")
file(WRITE "${WORK_DIR}/readme_example.yaml" "${CMAKE_MATCH_1}")
run(0 ARGS --assume-registered "${WORK_DIR}/readme_example.yaml" OUT "3\\. OrderShipped: all_of")
# And so does its numbered sequence's example.
string(FIND "${readme}" "## Numbered sequences" numbered_at)
string(SUBSTRING "${readme}" ${numbered_at} -1 numbered_section)
string(REGEX MATCH "```yaml\n([^`]*)```" _ "${numbered_section}")
file(WRITE "${WORK_DIR}/readme_numbered.yaml" "${CMAKE_MATCH_1}")
run(0 ARGS "${WORK_DIR}/readme_numbered.yaml"
  OUT "  numbered by header:seq, json:/seq, first number 0, gap timeout 10m, policy skip\n  1\\. Deposited: by number header:seq;")

message(STATUS "seqinbox validate: exit codes and output as expected")
