-- seqinbox schema version 1: sequence instances and sequenced (processed or buffered) messages.
-- SPEC §1-3. Scripts are applied in version order by seqinbox::postgresql::migrate (or
-- `seqinbox migrate`), each in one transaction, and must never change once released.

CREATE TABLE sequence_instance
(
    id                     bigserial                NOT NULL,
    name                   text                     NOT NULL,
    context_id             text                     NOT NULL,
    state                  text                     NOT NULL,
    created_at             timestamp with time zone NOT NULL,
    retain_until           timestamp with time zone NOT NULL,
    remove_after           timestamp with time zone,
    closed_at              timestamp with time zone,
    -- operator action waiting for the pending-action job (SPEC: CONSUME_ALL or CLOSE)
    pending_action         text,
    pending_action_requested_at timestamp with time zone,
    CONSTRAINT sequence_instance_pkey PRIMARY KEY (id),
    -- concurrent creation of one instance must yield one row
    CONSTRAINT sequence_instance_name_context_id_key UNIQUE (name, context_id),
    CONSTRAINT sequence_instance_state_check CHECK (state IN ('OPEN', 'CLOSED')),
    CONSTRAINT sequence_instance_pending_action_check
        CHECK (pending_action IN ('CONSUME_ALL', 'CLOSE')),
    CONSTRAINT sequence_instance_pending_action_requested_check
        CHECK ((pending_action IS NULL) = (pending_action_requested_at IS NULL))
);

-- housekeeping scans
CREATE INDEX sequence_instance_retain_until ON sequence_instance (retain_until);
CREATE INDEX sequence_instance_remove_after ON sequence_instance (remove_after);
CREATE INDEX sequence_instance_pending_action ON sequence_instance (pending_action)
    WHERE pending_action IS NOT NULL;

CREATE TABLE sequenced_message
(
    id                     bigserial                NOT NULL,
    sequence_instance_id   bigint                   NOT NULL
        REFERENCES sequence_instance ON DELETE CASCADE,
    message_type           text                     NOT NULL,  -- qualified type
    idempotence_id         text                     NOT NULL,
    state                  text                     NOT NULL,
    created_at             timestamp with time zone NOT NULL,
    state_changed_at       timestamp with time zone NOT NULL,
    -- origin of the delivery and, while WAITING, its raw payload for the replay
    cluster                text,
    topic                  text,
    partition              integer,
    "offset"               bigint,
    key                    bytea,
    value                  bytea,
    traceparent            text,
    -- operator action waiting for the pending-action job (SPEC: CONSUME or EXPIRE)
    pending_action         text,
    pending_action_requested_at timestamp with time zone,
    CONSTRAINT sequenced_message_pkey PRIMARY KEY (id),
    CONSTRAINT sequenced_message_state_check CHECK (state IN ('WAITING', 'PROCESSED', 'FAILED')),
    CONSTRAINT sequenced_message_pending_action_check
        CHECK (pending_action IN ('CONSUME', 'EXPIRE')),
    CONSTRAINT sequenced_message_pending_action_requested_check
        CHECK ((pending_action IS NULL) = (pending_action_requested_at IS NULL))
);

-- Deliberately NOT unique: databases may hold historical duplicates (seed, "Migration notes");
-- the claim table, not this index, arbitrates concurrent deliveries.
CREATE INDEX sequenced_message_idempotence_id
    ON sequenced_message (message_type, idempotence_id);
CREATE INDEX sequenced_message_sequence_instance_id_state
    ON sequenced_message (sequence_instance_id, state);
CREATE INDEX sequenced_message_pending_action ON sequenced_message (pending_action)
    WHERE pending_action IS NOT NULL;

-- Headers kept with a buffered message for its replay; values are bytes, and names may repeat.
CREATE TABLE sequenced_message_header
(
    sequenced_message_id   bigint  NOT NULL REFERENCES sequenced_message ON DELETE CASCADE,
    position               integer NOT NULL,  -- original order of the headers
    name                   text    NOT NULL,
    value                  bytea,             -- NULL: header present without a value
    CONSTRAINT sequenced_message_header_pkey PRIMARY KEY (sequenced_message_id, position)
);
