-- seqinbox MariaDB schema version 1: the tables of the PostgreSQL schema after its V8, for InnoDB.
-- Applied by seqinbox::mariadb::migrate statement by statement (MariaDB commits each DDL
-- statement on its own), then recorded; every statement can run again after a stop halfway.
--
-- Keys (types, idempotence ids, context ids, sequence names) are VARBINARY: compared byte by byte
-- and without PAD SPACE (under utf8mb4_bin 'a' and 'a ' are one key), 1,024 bytes at most
-- (seqinbox::max_key_bytes), which keeps a two-column key within InnoDB's 3,072-byte limit. The
-- engine checks that they are UTF-8 without NUL. Times are DATETIME(6) in UTC, written and read as
-- microseconds since the epoch (no session time zone is involved). Payloads are LONGBLOB.

CREATE TABLE IF NOT EXISTS sequence_instance
(
    id                          BIGINT          NOT NULL AUTO_INCREMENT,
    name                        VARBINARY(1024) NOT NULL,
    context_id                  VARBINARY(1024) NOT NULL,
    state                       VARCHAR(6)      NOT NULL,
    created_at                  DATETIME(6)     NOT NULL,
    retain_until                DATETIME(6)     NOT NULL,
    remove_after                DATETIME(6)     NULL,
    closed_at                   DATETIME(6)     NULL,
    -- operator action waiting for the pending-action job (CONSUME_ALL or CLOSE)
    pending_action              VARCHAR(11)     NULL,
    pending_action_requested_at DATETIME(6)     NULL,
    CONSTRAINT sequence_instance_pkey PRIMARY KEY (id),
    -- concurrent creation of one instance must yield one row
    CONSTRAINT sequence_instance_name_context_id_key UNIQUE (name, context_id),
    CONSTRAINT sequence_instance_state_check CHECK (state IN ('OPEN', 'CLOSED')),
    CONSTRAINT sequence_instance_pending_action_check CHECK (pending_action IN ('CONSUME_ALL', 'CLOSE')),
    CONSTRAINT sequence_instance_pending_action_requested_check
        CHECK ((pending_action IS NULL) = (pending_action_requested_at IS NULL)),
    -- housekeeping scans: expiry marking and removal (by state, removal mark, retention end),
    -- closed cleanup (by sequence and closing time), pending actions
    INDEX sequence_instance_housekeeping (state, remove_after, retain_until, id),
    INDEX sequence_instance_closed_window (state, name, closed_at, id),
    INDEX sequence_instance_pending_action (pending_action)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The row a transaction locks (SELECT ... FOR UPDATE, or the insert creating it) to hold an
-- instance's lock. A separate table because InnoDB's foreign key check takes a shared lock on the
-- parent row: an exclusive lock on the sequence_instance row would make every insert of a claim or
-- message of the instance on another connection wait for the holder (PostgreSQL's FOR NO KEY
-- UPDATE has no InnoDB equivalent). Created on first lock.
CREATE TABLE IF NOT EXISTS sequence_instance_lock
(
    sequence_instance_id BIGINT NOT NULL,
    CONSTRAINT sequence_instance_lock_pkey PRIMARY KEY (sequence_instance_id),
    CONSTRAINT sequence_instance_lock_instance_fkey FOREIGN KEY (sequence_instance_id)
        REFERENCES sequence_instance (id) ON DELETE CASCADE
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS sequenced_message
(
    id                          BIGINT          NOT NULL AUTO_INCREMENT,
    sequence_instance_id        BIGINT          NOT NULL,
    message_type                VARBINARY(1024) NOT NULL,  -- qualified type
    idempotence_id              VARBINARY(1024) NOT NULL,
    state                       VARCHAR(9)      NOT NULL,
    created_at                  DATETIME(6)     NOT NULL,
    state_changed_at            DATETIME(6)     NOT NULL,
    -- origin of the delivery and, while WAITING, its raw record for the replay
    cluster                     LONGBLOB        NULL,
    topic                       LONGBLOB        NULL,
    `partition`                 INT             NULL,
    `offset`                    BIGINT          NULL,
    record_key                  LONGBLOB        NULL,
    record_value                LONGBLOB        NULL,
    traceparent                 LONGBLOB        NULL,
    record_time                 DATETIME(6)     NULL,
    -- the headers in their order, each: 4-byte big-endian name length, name, 4-byte value length,
    -- value; NULL: no record
    record_headers              LONGBLOB        NULL,
    -- operator action waiting for the pending-action job (CONSUME or EXPIRE)
    pending_action              VARCHAR(7)      NULL,
    pending_action_requested_at DATETIME(6)     NULL,
    CONSTRAINT sequenced_message_pkey PRIMARY KEY (id),
    CONSTRAINT sequenced_message_instance_fkey FOREIGN KEY (sequence_instance_id)
        REFERENCES sequence_instance (id) ON DELETE CASCADE,
    CONSTRAINT sequenced_message_state_check CHECK (state IN ('WAITING', 'PROCESSED', 'FAILED')),
    CONSTRAINT sequenced_message_pending_action_check CHECK (pending_action IN ('CONSUME', 'EXPIRE')),
    CONSTRAINT sequenced_message_pending_action_requested_check
        CHECK ((pending_action IS NULL) = (pending_action_requested_at IS NULL)),
    -- Deliberately NOT unique: databases may hold historical duplicates; the claim table, not
    -- this index, arbitrates concurrent deliveries.
    INDEX sequenced_message_idempotence_id (message_type, idempotence_id),
    INDEX sequenced_message_sequence_instance_id_state (sequence_instance_id, state, id),
    INDEX sequenced_message_pending_action (pending_action)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The insert-first claim table of the design note. claim_token: the token of the statement that
-- inserted the row, which `INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING` reads back to tell a
-- won claim (its own token) from a lost one; the affected-row count cannot, as SOCI connects with
-- CLIENT_FOUND_ROWS.
CREATE TABLE IF NOT EXISTS sequential_inbox_idempotence
(
    message_type         VARBINARY(1024) NOT NULL,
    idempotence_id       VARBINARY(1024) NOT NULL,
    sequence_instance_id BIGINT          NOT NULL,
    created_at           DATETIME(6)     NOT NULL,
    claim_token          BIGINT          NOT NULL,
    CONSTRAINT sequential_inbox_idempotence_pkey PRIMARY KEY (message_type, idempotence_id),
    CONSTRAINT sequential_inbox_idempotence_instance_fkey FOREIGN KEY (sequence_instance_id)
        REFERENCES sequence_instance (id) ON DELETE CASCADE
) ENGINE = InnoDB;

-- The row store_message locks (inserted, or found, by INSERT ... ON DUPLICATE KEY UPDATE) to hold
-- a key's exclusive lock until its transaction ends: the state steps of one key are serialised
-- (PostgreSQL's store takes an advisory transaction lock instead). Removed with its instance.
CREATE TABLE IF NOT EXISTS sequenced_message_key_lock
(
    message_type         VARBINARY(1024) NOT NULL,
    idempotence_id       VARBINARY(1024) NOT NULL,
    sequence_instance_id BIGINT          NOT NULL,
    CONSTRAINT sequenced_message_key_lock_pkey PRIMARY KEY (message_type, idempotence_id),
    CONSTRAINT sequenced_message_key_lock_instance_fkey FOREIGN KEY (sequence_instance_id)
        REFERENCES sequence_instance (id) ON DELETE CASCADE
) ENGINE = InnoDB;
