-- seqinbox: each statement on its own, outside a transaction
-- seqinbox schema version 8: indexes so that a closed-cleanup batch stops at the first instance
-- still inside its deduplication window, and a removal batch reads WAITING rows in pages
-- (docs/operations.md). Built with CREATE INDEX CONCURRENTLY as V7; safe to run again.

-- closed cleanup: CLOSED instances per (sequence, retention), by closing time. A window is one per
-- sequence (declared) or the retention an instance was created with, so within one group the
-- window ends in closing order and a range scan per group stops at the first one still kept.
DROP INDEX CONCURRENTLY IF EXISTS sequence_instance_closed_window;
CREATE INDEX CONCURRENTLY sequence_instance_closed_window
    ON sequence_instance (name, (retain_until - created_at), (COALESCE(closed_at, created_at)), id)
    WHERE state = 'CLOSED';
-- the index of V7 on CLOSED instances by id, which no query needs any more
DROP INDEX CONCURRENTLY IF EXISTS sequence_instance_closed;

-- removal: the WAITING rows of an instance by id, read in pages by keyset
DROP INDEX CONCURRENTLY IF EXISTS sequenced_message_waiting;
CREATE INDEX CONCURRENTLY sequenced_message_waiting ON sequenced_message (sequence_instance_id, id)
    WHERE state = 'WAITING';
