-- seqinbox: each statement on its own, outside a transaction
-- seqinbox schema version 7: indexes that reach only the rows each housekeeping job works on, in
-- the order it takes them, so that the cost of a batch does not grow with the backlog or with the
-- batches done before it (docs/operations.md). Built with CREATE INDEX CONCURRENTLY, which cannot
-- run in a transaction (the line above tells the migration runner): writers go on meanwhile.
-- A build interrupted leaves an invalid index; running this script again drops it first.

-- closed cleanup: CLOSED instances by id
DROP INDEX CONCURRENTLY IF EXISTS sequence_instance_closed;
CREATE INDEX CONCURRENTLY sequence_instance_closed ON sequence_instance (id) WHERE state = 'CLOSED';

-- expiry marking: OPEN instances not yet marked, by retention end
DROP INDEX CONCURRENTLY IF EXISTS sequence_instance_unmarked;
CREATE INDEX CONCURRENTLY sequence_instance_unmarked ON sequence_instance (retain_until, id)
    WHERE state = 'OPEN' AND remove_after IS NULL;

-- removal: marked OPEN instances by removal time; it replaces the index of V1 on every row's
-- remove_after (NULL but for marked ones), which no query needs any more
DROP INDEX CONCURRENTLY IF EXISTS sequence_instance_marked;
CREATE INDEX CONCURRENTLY sequence_instance_marked ON sequence_instance (remove_after, id)
    WHERE state = 'OPEN' AND remove_after IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS sequence_instance_remove_after;
