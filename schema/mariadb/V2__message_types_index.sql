-- seqinbox MariaDB schema version 2: an index that answers the distinct types of an instance's
-- PROCESSED and WAITING messages (read with every claim won, under the instance lock) from the
-- index alone and in its order. Without it that read built a temporary table for DISTINCT, the
-- costliest statement of a claim (0.55 ms of a 0.85 ms claim round trip, measured on 10.11).
-- InnoDB builds it online; it can run again after a stop halfway.

CREATE INDEX IF NOT EXISTS sequenced_message_instance_types ON sequenced_message (sequence_instance_id, state, message_type);
