-- seqinbox MariaDB schema version 4: numbered sequences (messages carry a per-context number).
-- InnoDB builds the columns and indexes online; every statement can run again after a stop halfway.
--
-- The number a context gave up to (skip_numbers) is kept on the instance's lock row, not on
-- sequence_instance: the transaction writing it holds that row exclusively already, whereas an
-- UPDATE of the sequence_instance row would wait for (and deadlock with) claims whose foreign key
-- checks hold it shared (see store.hpp).

ALTER TABLE sequenced_message ADD COLUMN IF NOT EXISTS sequence_number BIGINT NULL;

ALTER TABLE sequence_instance_lock ADD COLUMN IF NOT EXISTS skipped_through BIGINT NULL;

-- An instance's WAITING messages from a number on, in number order (then id, the index's tail),
-- and the highest PROCESSED number read from the index's end.
CREATE INDEX IF NOT EXISTS sequenced_message_instance_numbers ON sequenced_message (sequence_instance_id, state, sequence_number);

-- The OPEN instances of one sequence in id order, for the gap-timeout scan.
CREATE INDEX IF NOT EXISTS sequence_instance_name_state ON sequence_instance (name, state, id);

-- The operator action SKIP_GAP on an instance (seqinbox::instance_action::skip_gap). MariaDB
-- checks the new constraint against every instance row.
ALTER TABLE sequence_instance
    DROP CONSTRAINT IF EXISTS sequence_instance_pending_action_check,
    ADD CONSTRAINT sequence_instance_pending_action_check CHECK (pending_action IN ('CONSUME_ALL', 'CLOSE', 'SKIP_GAP'));
