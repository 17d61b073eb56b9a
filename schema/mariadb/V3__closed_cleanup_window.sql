-- seqinbox MariaDB schema version 3: an index so that a closed-cleanup batch stops at the first
-- instance still inside its deduplication window instead of reading every CLOSED instance's
-- window end (docs/operations.md). A window is one per sequence (declared) or the retention an
-- instance was created with, so within one (sequence, retention) group of CLOSED instances the
-- window ends in closing order: a range scan per group, in the index's order, stops at the first
-- one still kept. The group and the order are virtual columns (computed, not stored) so that the
-- index can hold them. InnoDB builds it online; it can run again after a stop halfway.

ALTER TABLE sequence_instance
    ADD COLUMN IF NOT EXISTS retention_us BIGINT AS (TIMESTAMPDIFF(MICROSECOND, created_at, retain_until)) VIRTUAL,
    ADD COLUMN IF NOT EXISTS closed_key DATETIME(6) AS (COALESCE(closed_at, created_at)) VIRTUAL;

CREATE INDEX IF NOT EXISTS sequence_instance_closed_groups ON sequence_instance (state, name, retention_us, closed_key, id);

-- V1's index by closing time alone, which no query needs any more
DROP INDEX IF EXISTS sequence_instance_closed_window ON sequence_instance;
