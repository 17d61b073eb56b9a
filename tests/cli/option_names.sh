#!/usr/bin/env bash
# Every subcommand's --help names each option once, and each named option is one the parser
# takes: `run` had two `--batch-size` (records per batch, and housekeeping instances per
# transaction), of which only the first could ever be set.
# Usage: option_names.sh SEQINBOX
set -euo pipefail
seqinbox=$1
failed=0

options_of() { "$seqinbox" "$1" --help | grep -oE '^  --[a-z-]+' | sed 's/^  //'; }

for command in run housekeep migrate; do
    repeated=$(options_of "$command" | sort | uniq -d)
    if [[ -n $repeated ]]; then
        echo "FAIL: 'seqinbox $command --help' lists more than once: $repeated"
        failed=1
    fi
    for option in $(options_of "$command"); do
        [[ $option == --help ]] && continue
        # A usage error may name a missing option or a bad value, never this one as unknown.
        if "$seqinbox" "$command" "$option" 1 2>&1 >/dev/null | grep -q "unknown option '$option'"; then
            echo "FAIL: 'seqinbox $command' lists $option but does not take it"
            failed=1
        fi
    done
done

# The housekeeping batch of `run` is its own option. The help is read whole first: `grep -q` stops
# reading at its match, and under pipefail the program's SIGPIPE on its next line failed the check.
run_help=$("$seqinbox" run --help)
if ! grep -q -- '--housekeeping-batch-size N' <<<"$run_help"; then
    echo "FAIL: 'seqinbox run --help' does not list --housekeeping-batch-size"
    failed=1
fi
if [[ $failed == 0 ]]; then echo "option names: every --help option listed once and taken"; fi
exit $failed
