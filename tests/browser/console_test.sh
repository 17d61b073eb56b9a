#!/usr/bin/env bash
# browser_console: the relay with a throwaway PostgreSQL and dev-kafka (librdkafka's mock cluster
# as a process), one message left WAITING and a numbered account missing number 2, then
# console_test.py drives the console in headless Chromium. Screenshots go to OUTPUT_DIR.
# usage: console_test.sh SOURCE_DIR PROGRAM_DIR OUTPUT_DIR
set -euo pipefail
source_dir=$1
program_dir=$2
out_dir=$3
for tool in kcat /usr/bin/chromium /usr/bin/chromedriver; do
  command -v "$tool" >/dev/null || { echo "FAILED: $tool is missing; bash .ci/setup installs kcat, chromium, chromium-driver and python3-selenium"; exit 1; }
done
mkdir -p "$out_dir"
export PATH=$program_dir:$PATH
W=$(mktemp -d /tmp/seqinbox-browser.XXXXXX)
chmod 755 "$W"
PGBIN=/usr/lib/postgresql/15/bin
AS_PG=; if [ "$(id -u)" = 0 ]; then AS_PG="runuser -u postgres --"; chown postgres "$W"; fi
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  [[ -e $W/pg/postmaster.pid ]] && $AS_PG $PGBIN/pg_ctl -D "$W/pg" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT
fail() { echo "FAILED: $*"; for log in "$W"/*.log; do echo "--- $log"; tail -40 "$log"; done; exit 1; }

seqinbox dev-kafka --topic orders:3 --topic orders-in-order:3 --topic orders-dlq:1 --topic ledger-in-order:1 --bootstrap-file "$W/kafka" 2>"$W/kafka.log" &
pids+=($!)
timeout 30 sh -c "until [ -s $W/kafka ]; do sleep 0.1; done" || fail "dev-kafka did not start"
KAFKA=$(cat "$W/kafka")
$AS_PG $PGBIN/initdb -D "$W/pg" -U postgres -A trust >/dev/null
$AS_PG $PGBIN/pg_ctl -D "$W/pg" -o "-k $W -c listen_addresses=''" -l "$W/pg.log" -w start >/dev/null
DB="host=$W user=postgres dbname=postgres"
seqinbox migrate --postgres "$DB" >/dev/null
# OrderShipped before its predecessor OrderValidated: it waits
echo 'o-1:{"order":{"id":"o-1"}}' | kcat -b "$KAFKA" -P -t orders -K: -H message-type=OrderShipped -H idempotence-id=s-1
# o-many: 150 messages, more than the console's first page of 100 (its "More" appends the rest)
psql "$DB" -q -v ON_ERROR_STOP=1 -c "WITH i AS (INSERT INTO sequence_instance (name, context_id, state, created_at, retain_until)
  VALUES ('OrderSequence', 'o-many', 'OPEN', now(), now() + interval '7 days') RETURNING id)
  INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at)
  SELECT i.id, 'OrderShipped', 'many-' || n, 'PROCESSED', now(), now() FROM i, generate_series(1, 150) n" || fail "could not add o-many"
# the example's orders and a ledger numbered by header seq, without a gap timeout (it holds)
{ cat "$source_dir/tests/examples/relay_orders.yaml"; cat <<'EOF'
  - name: LedgerSequence
    retentionPeriod: 7d
    messages:
      - { type: LedgerEntry, contextIdExtractor: key, sequenceNumber: "header:seq" }
EOF
} >"$W/declarations.yaml"
for n in 1 3 4; do
  echo "acct-1:entry $n" | kcat -b "$KAFKA" -P -t orders -K: -H message-type=LedgerEntry -H idempotence-id=acct-1-$n -H seq=$n
done
token() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
echo "view-$(token)" >"$W/view-token"
echo "write-$(token)" >"$W/write-token"
seqinbox run --declarations "$W/declarations.yaml" --postgres "$DB" --bootstrap-servers "$KAFKA" \
  --input-topic orders --output-topic OrderSequence=orders-in-order --output-topic LedgerSequence=ledger-in-order --dead-letter-topic orders-dlq \
  --http-port 0 --view-token-file "$W/view-token" --write-token-file "$W/write-token" --actions-every 1s 2>"$W/relay.log" &
pids+=($!)
timeout 60 sh -c "until grep -q 'buffered' $W/relay.log; do sleep 0.2; done" || fail "the relay did not buffer OrderShipped"
waiting_entries() { psql "$DB" -tAq -c "SELECT count(*) FROM sequenced_message WHERE message_type = 'LedgerEntry' AND state = 'WAITING'"; }
for _ in $(seq 300); do [[ $(waiting_entries) == 2 ]] && break; sleep 0.2; done
[[ $(waiting_entries) == 2 ]] || fail "the relay did not buffer entries 3 and 4 of acct-1 (waiting: $(waiting_entries))"
port=$(grep -o '127\.0\.0\.1:[0-9]*' "$W/relay.log" | head -1 | cut -d: -f2)
[[ -n $port ]] || fail "no port in the relay's log"
/usr/bin/python3 "$source_dir/tests/browser/console_test.py" "http://127.0.0.1:$port/" "$W/view-token" "$W/write-token" "$out_dir" ||
  fail "the browser test failed"
shipped=$(kcat -b "$KAFKA" -C -t orders-in-order -e -q -f '%h\n')
[[ $shipped == *"idempotence-id=s-1"* ]] || fail "the consumed OrderShipped did not reach the output topic: '$shipped'"
entries=$(kcat -b "$KAFKA" -C -t ledger-in-order -e -q -f '%h\n' | grep -o 'seq=[0-9]*' | tr '\n' ' ')
[[ $entries == "seq=1 seq=3 seq=4 " ]] || fail "after the gap was skipped the ledger published '$entries', not 'seq=1 seq=3 seq=4 '"
echo "screenshots: $out_dir/console.png $out_dir/console-after-consume.png"
