#!/usr/bin/env bash
# readme_walkthrough: runs the fenced ```sh block of README.md between <!-- walkthrough:begin -->
# and <!-- walkthrough:end --> as written, with bash -euo pipefail, from a copy of the repository's
# top level whose build/bin is this build's program directory. Passes when every command
# succeeds and the consumed records (stdout lines starting "o-1 ") are exactly the ones the
# block shows as "# o-1 ..." comments, in that order. Whatever the block started — background
# processes, the throwaway PostgreSQL — is stopped afterwards, also on failure or timeout.
# usage: readme_walkthrough.sh SOURCE_DIR PROGRAM_DIR
set -euo pipefail
source_dir=$1
program_dir=$2
command -v kcat >/dev/null || { echo "kcat is not installed (bash .ci/setup installs it)"; exit 1; }

work=$(mktemp -d /tmp/seqinbox-walkthrough.XXXXXX)
chmod 755 "$work"  # the throwaway PostgreSQL runs as postgres when we are root
mkdir -p "$work/top/build" "$work/tmp"
chmod 1777 "$work/tmp"
ln -s "$program_dir" "$work/top/build/bin"
ln -s "$source_dir/tests" "$work/top/tests"

group=
stop_postgres() {  # every server whose data directory the block created under $TMPDIR
  local pidfile server
  for pidfile in "$work"/tmp/*/*/postmaster.pid; do
    [[ -e $pidfile ]] || continue
    server=$(head -1 "$pidfile")
    kill -QUIT "$server" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
  done
}
cleanup() {
  [[ -z $group ]] || kill -KILL -- "-$group" 2>/dev/null || true
  stop_postgres
  rm -rf "$work"
}
trap cleanup EXIT

sed -n '/<!-- walkthrough:begin -->/,/<!-- walkthrough:end -->/p' "$source_dir/README.md" | grep -v '^<!--\|^```' >"$work/walkthrough.sh"
grep -q 'seqinbox run' "$work/walkthrough.sh" || { echo "README.md has no walk-through between the markers"; exit 1; }
sed -n 's/^# \(o-1 .*\)$/\1/p' "$work/walkthrough.sh" >"$work/expected"
[[ -s $work/expected ]] || { echo "the walk-through shows no '# o-1 ...' output lines"; exit 1; }

# timeout makes itself a process-group leader and, on expiry, signals the whole group: every
# background process of the block (pg_ctl puts PostgreSQL in a session of its own: stop_postgres).
(cd "$work/top" && TMPDIR="$work/tmp" exec timeout 240 bash -euo pipefail "$work/walkthrough.sh") >"$work/output" 2>&1 &
group=$!
status=0
wait "$group" || status=$?
show() {
  echo "--- walk-through output:"; cat "$work/output"
  for log in "$work"/tmp/*/relay.log; do [[ -e $log ]] && { echo "--- $log:"; cat "$log"; }; done
  return 0
}
if [[ $status != 0 ]]; then
  show
  echo "FAILED: the walk-through exited with status $status (124: timed out)"
  exit 1
fi
grep '^o-1 ' "$work/output" >"$work/consumed" || true
if ! diff -u "$work/expected" "$work/consumed"; then
  show
  echo "FAILED: the consumed records (+) are not the ones README.md shows (-)"
  exit 1
fi
echo "walk-through ran as written; consumed, in order and once each:"
cat "$work/consumed"
