#!/usr/bin/env bash
# cli_redrive: `seqinbox redrive` against `seqinbox dev-kafka` (librdkafka's mock cluster as a
# process), dead letters written and copies read with kcat. A copy keeps the original key, value,
# headers and partition without the failure headers; --kind, --type and --since select; the
# ledger makes a second run copy nothing again; --dry-run copies and records nothing; a dead letter
# whose value the sink left out is skipped and counted.
# usage: redrive.sh SEQINBOX_PROGRAM
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
  echo "--- dev-kafka stderr:"; cat "$work/err" || true
  exit 1
}

"$seqinbox" dev-kafka --topic orders:3 --topic orders-dlq:1 --topic orders-dlq.redriven:1 --topic other:1 \
  --bootstrap-file "$work/servers" >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 200); do [[ -s $work/servers ]] && break; kill -0 "$pid" 2>/dev/null || fail "dev-kafka exited"; sleep 0.1; done
[[ -s $work/servers ]] || fail "no bootstrap file within 20 s"
servers=$(cat "$work/servers")

# Dead letters as the sink writes them: the original headers, then the failure headers.
dead_letter() {  # key value kind type [extra kcat arguments]
  local key=$1 value=$2 kind=$3 type=$4
  shift 4
  echo "$key:$value" | kcat -b "$servers" -P -t orders-dlq -K: -H message-type="$type" -H idempotence-id="$value" \
    -H seqinbox-reason="listener failed: boom" -H seqinbox-failure-kind="$kind" -H seqinbox-type="$type" \
    -H seqinbox-idempotence-id="$value" -H seqinbox-context-id="$key" -H seqinbox-original-topic=orders \
    -H seqinbox-original-partition=2 -H seqinbox-original-offset=17 "$@"
}
dead_letter o-1 c1 listener_failed OrderCreated
dead_letter o-2 s2 undecodable_on_replay OrderShipped
dead_letter o-3 s3 listener_failed OrderShipped -H seqinbox-omitted=value

redrive() { "$seqinbox" redrive --bootstrap-servers "$servers" --from orders-dlq --to orders --json "$@"; }
expect() {  # what json-field value...
  local what=$1 json=$2
  shift 2
  for pair in "$@"; do
    grep -q "\"${pair%%=*}\": ${pair#*=}[,}]" <<<"$json" || fail "$what: expected ${pair%%=*} ${pair#*=} in $json"
  done
}
copies() { kcat -b "$servers" -C -t orders -e -q -f '%p|%k|%s|%h\n' | sort; }

out=$(redrive --kind listener_failed --dry-run)
expect "dry run" "$out" read=3 selected=2 copied=1 already_copied=0 omitted=1
[[ -z $(copies) ]] || fail "the dry run copied: $(copies)"
[[ -z $(kcat -b "$servers" -C -t orders-dlq.redriven -e -q) ]] || fail "the dry run wrote the ledger"

out=$(redrive --kind listener_failed)
expect "first run" "$out" selected=2 copied=1 already_copied=0 omitted=1
[[ $(copies) == "2|o-1|c1|message-type=OrderCreated,idempotence-id=c1" ]] ||
  fail "the copy is '$(copies)', not the original on partition 2 without failure headers"
grep -q '"listener_failed": 1' <<<"$out" || fail "no count per kind in $out"

out=$(redrive)
expect "second run" "$out" read=3 selected=3 copied=1 already_copied=1 omitted=1
[[ $(copies | wc -l) == 2 ]] || fail "after the second run: $(copies)"
out=$(redrive)
expect "third run" "$out" copied=0 already_copied=2 omitted=1
[[ $(copies | wc -l) == 2 ]] || fail "the third run copied again: $(copies)"

expect "by type" "$(redrive --type OrderCreated --dry-run)" selected=1 already_copied=1
expect "since the future" "$(redrive --since 2099-01-01T00:00:00Z --dry-run)" selected=0
expect "since an hour ago" "$(redrive --since 1h --dry-run)" selected=3

status=0
err=$("$seqinbox" redrive --bootstrap-servers "$servers" --from orders-dlq --to orders --kind bogus 2>&1) || status=$?
[[ $status == 2 && $err == *"unknown failure kind 'bogus'"* ]] || fail "--kind bogus: exit $status, $err"
status=0
err=$("$seqinbox" redrive --bootstrap-servers "$servers" --to orders 2>&1) || status=$?
[[ $status == 2 && $err == *"'--from'"* ]] || fail "no --from: exit $status, $err"
echo "redrive: copies keep key, value, headers and partition without failure headers; kind, type and since select; the ledger stops a second copy; dry runs write nothing"
