-- seqinbox schema version 2: the insert-first claim table, exactly as in the design note
-- (seeds/sequential-inbox-idempotence.txt). Only adds the table: historical duplicate
-- sequenced_message rows stay as they are and do not block this upgrade.

CREATE TABLE sequential_inbox_idempotence
(
    message_type         text                     NOT NULL,
    idempotence_id       text                     NOT NULL,
    sequence_instance_id bigint                   NOT NULL REFERENCES sequence_instance ON DELETE CASCADE,
    created_at           timestamp with time zone NOT NULL,
    CONSTRAINT sequential_inbox_idempotence_pkey PRIMARY KEY (message_type, idempotence_id)
);

CREATE INDEX sequential_inbox_idempotence_sequence_instance_id
    ON sequential_inbox_idempotence (sequence_instance_id);
