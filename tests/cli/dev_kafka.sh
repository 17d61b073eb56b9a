#!/usr/bin/env bash
# cli_dev_kafka: `seqinbox dev-kafka` as a script uses it. It writes its bootstrap servers to the
# file and to stdout, kcat sees its topics with their partition counts and round-trips a record,
# and SIGTERM stops it with exit 0 and removes the file.
# usage: dev_kafka.sh SEQINBOX_PROGRAM
set -euo pipefail
seqinbox=$1
command -v kcat >/dev/null || { echo "kcat is not installed (bash .ci/setup installs it)"; exit 1; }

work=$(mktemp -d)
pid=
cleanup() {
  [[ -z $pid ]] || kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*"
  echo "--- dev-kafka stdout:"; cat "$work/out" || true
  echo "--- dev-kafka stderr:"; cat "$work/err" || true
  exit 1
}

"$seqinbox" dev-kafka --topic orders:3 --topic orders-dlq:1 --brokers 2 --bootstrap-file "$work/servers" >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 200); do [[ -s $work/servers ]] && break; kill -0 "$pid" 2>/dev/null || fail "dev-kafka exited"; sleep 0.1; done
[[ -s $work/servers ]] || fail "no bootstrap file within 20 s"
servers=$(cat "$work/servers")
[[ $servers =~ ^127\.0\.0\.1:[0-9]+,127\.0\.0\.1:[0-9]+$ ]] || fail "bootstrap file holds '$servers', not two loopback brokers"
[[ $(cat "$work/out") == "bootstrap.servers=$servers" ]] || fail "stdout is not the line bootstrap.servers=$servers"

metadata=$(kcat -b "$servers" -L)
grep -q 'topic "orders" with 3 partitions' <<<"$metadata" || fail "no topic orders with 3 partitions in: $metadata"
grep -q 'topic "orders-dlq" with 1 partitions' <<<"$metadata" || fail "no topic orders-dlq with 1 partition in: $metadata"
echo 'o-1:hello' | kcat -b "$servers" -P -t orders -K: -H message-type=OrderCreated
record=$(kcat -b "$servers" -C -t orders -e -q -f '%k %h %s\n')
[[ $record == "o-1 message-type=OrderCreated hello" ]] || fail "read back '$record'"

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[[ $status == 0 ]] || fail "exit status $status after SIGTERM, expected 0"
[[ ! -e $work/servers ]] || fail "the bootstrap file is still there after stopping"
grep -q "stopping on SIGTERM" "$work/err" || fail "no 'stopping on SIGTERM' on stderr"
echo "dev-kafka: bootstrap file and line, topics, a record round trip, exit 0 on SIGTERM"
