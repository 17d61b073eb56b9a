-- seqinbox schema version 9: housekeeping job leases. A job runs in one service instance at a
-- time: the one whose lease has not expired. A lease is a row, not a lock held by a session or
-- an open transaction, so that nothing is held between statements: through a transaction pooler
-- (PgBouncer) a server connection is not kept for a whole run (PAUSE would wait for it) nor
-- closed under the holder (idle_transaction_timeout). A holder that dies keeps the job until its
-- lease expires; expiry is the server's clock.
CREATE TABLE seqinbox_job_lease (
    job        text PRIMARY KEY,
    holder     text NOT NULL,        -- host, process and a random token of the lease's taker
    expires_at timestamptz NOT NULL
);
