-- seqinbox schema version 10: numbered sequences (README, "Numbered sequences"). A message of a
-- numbered sequence keeps its number in sequence_number (NULL for every other message); an
-- instance keeps in skipped_through the number up to which its gaps were given up (NULL: none).
-- Both columns are nullable without a default: adding them rewrites no row. Their indexes come in
-- V11, built without blocking writers.
--
-- An instance's pending action may be SKIP_GAP (give the numbers missing before its first WAITING
-- one up). The check that allows it is added NOT VALID, so that no scan of the instances holds
-- their lock: the rows there satisfy the narrower check they had. V11 validates it.
--
-- seqinbox_store_message and seqinbox_store_messages take the number as a last parameter: a
-- FAILED row taken over in place gets the new row's number; WAITING rows turned PROCESSED keep
-- theirs (the same message). The signatures of V6 stay, storing rows without a number, for the
-- processes of the previous version still running while the schema is upgraded.

ALTER TABLE sequenced_message ADD COLUMN sequence_number bigint;
ALTER TABLE sequence_instance ADD COLUMN skipped_through bigint;
ALTER TABLE sequence_instance DROP CONSTRAINT sequence_instance_pending_action_check,
    ADD CONSTRAINT sequence_instance_pending_action_check CHECK (pending_action IN ('CONSUME_ALL', 'CLOSE', 'SKIP_GAP')) NOT VALID;

CREATE FUNCTION seqinbox_store_message(
    p_instance bigint, p_type text, p_idempotence_id text, p_state text,
    p_created_at timestamp with time zone, p_state_changed_at timestamp with time zone,
    p_with_record boolean, p_cluster text, p_topic text, p_partition integer, p_offset bigint,
    p_key bytea, p_value bytea, p_traceparent text, p_record_time timestamp with time zone,
    p_headers text, p_number bigint) RETURNS text
    LANGUAGE plpgsql VOLATILE AS
$$
DECLARE
    v_processed boolean;
    v_waiting boolean;
    v_id bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_type), hashtext(p_idempotence_id));
    SELECT bool_or(state = 'PROCESSED'), bool_or(state = 'WAITING'), max(id) FILTER (WHERE state = 'FAILED')
    INTO v_processed, v_waiting, v_id
    FROM sequenced_message WHERE message_type = p_type AND idempotence_id = p_idempotence_id;
    IF v_processed OR (v_waiting AND p_state <> 'PROCESSED') THEN
        RETURN 'LEFT_EXISTING';
    END IF;
    IF v_waiting THEN
        UPDATE sequenced_message SET state = p_state, state_changed_at = p_state_changed_at
        WHERE message_type = p_type AND idempotence_id = p_idempotence_id AND state = 'WAITING';
        RETURN 'UPDATED';
    END IF;
    IF v_id IS NOT NULL THEN
        IF p_with_record THEN
            UPDATE sequenced_message
            SET state = p_state, state_changed_at = p_state_changed_at, cluster = p_cluster, topic = p_topic,
                partition = p_partition, "offset" = p_offset, key = p_key, value = p_value, traceparent = p_traceparent,
                record_time = p_record_time, record_headers = p_headers, sequence_number = p_number
            WHERE id = v_id;
        ELSE
            UPDATE sequenced_message SET state = p_state, state_changed_at = p_state_changed_at, sequence_number = p_number
            WHERE id = v_id;
        END IF;
        RETURN 'UPDATED';
    END IF;
    IF p_with_record THEN
        INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,
                                       state_changed_at, cluster, topic, partition, "offset", key, value,
                                       traceparent, record_time, record_headers, sequence_number)
        VALUES (p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at, p_cluster, p_topic,
                p_partition, p_offset, p_key, p_value, p_traceparent, p_record_time, p_headers, p_number);
    ELSE
        INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,
                                       state_changed_at, sequence_number)
        VALUES (p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at, p_number);
    END IF;
    RETURN 'INSERTED';
END
$$;

CREATE FUNCTION seqinbox_store_messages(
    p_instance bigint[], p_type text[], p_idempotence_id text[], p_state text[],
    p_created_at bigint[], p_state_changed_at bigint[], p_with_record boolean[], p_cluster text[], p_topic text[],
    p_partition integer[], p_offset bigint[], p_key text[], p_value text[], p_traceparent text[],
    p_record_time bigint[], p_headers text[], p_number bigint[]) RETURNS void
    LANGUAGE plpgsql VOLATILE AS
$$
DECLARE
    v_stored_before bigint[];  -- positions of the keys that have rows already
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(k.message_type), hashtext(k.idempotence_id))
    FROM unnest(p_type, p_idempotence_id) AS k(message_type, idempotence_id)
    ORDER BY k.message_type COLLATE "C", k.idempotence_id COLLATE "C";

    -- One index probe per key (LATERAL with LIMIT): as a join, the planner would hash the table.
    SELECT array_agg(k.position) INTO v_stored_before
    FROM unnest(p_type, p_idempotence_id) WITH ORDINALITY AS k(message_type, idempotence_id, position)
    CROSS JOIN LATERAL (SELECT 1 FROM sequenced_message m
                        WHERE m.message_type = k.message_type AND m.idempotence_id = k.idempotence_id LIMIT 1) AS stored;

    IF v_stored_before IS NOT NULL THEN
        PERFORM seqinbox_store_message(g.instance, g.message_type, g.idempotence_id, g.state,
                                       TIMESTAMPTZ 'epoch' + g.created_at * INTERVAL '1 microsecond',
                                       TIMESTAMPTZ 'epoch' + g.state_changed_at * INTERVAL '1 microsecond',
                                       g.with_record, g.cluster, g.topic, g.partition, g."offset", decode(g.key, 'hex'),
                                       decode(g.value, 'hex'), g.traceparent,
                                       TIMESTAMPTZ 'epoch' + g.record_time * INTERVAL '1 microsecond', g.headers,
                                       g.sequence_number)
        FROM unnest(p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at, p_with_record, p_cluster,
                    p_topic, p_partition, p_offset, p_key, p_value, p_traceparent, p_record_time, p_headers, p_number)
             WITH ORDINALITY
             AS g(instance, message_type, idempotence_id, state, created_at, state_changed_at, with_record, cluster, topic,
                  partition, "offset", key, value, traceparent, record_time, headers, sequence_number, position)
        WHERE g.position = ANY (v_stored_before)
        ORDER BY g.position;
    END IF;

    INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at,
                                   cluster, topic, partition, "offset", key, value, traceparent, record_time, record_headers,
                                   sequence_number)
    SELECT g.instance, g.message_type, g.idempotence_id, g.state,
           TIMESTAMPTZ 'epoch' + g.created_at * INTERVAL '1 microsecond',
           TIMESTAMPTZ 'epoch' + g.state_changed_at * INTERVAL '1 microsecond',
           CASE WHEN g.with_record THEN g.cluster END, CASE WHEN g.with_record THEN g.topic END,
           CASE WHEN g.with_record THEN g.partition END, CASE WHEN g.with_record THEN g."offset" END,
           CASE WHEN g.with_record THEN decode(g.key, 'hex') END, CASE WHEN g.with_record THEN decode(g.value, 'hex') END,
           CASE WHEN g.with_record THEN g.traceparent END,
           CASE WHEN g.with_record THEN TIMESTAMPTZ 'epoch' + g.record_time * INTERVAL '1 microsecond' END,
           CASE WHEN g.with_record THEN g.headers END, g.sequence_number
    FROM unnest(p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at, p_with_record, p_cluster,
                p_topic, p_partition, p_offset, p_key, p_value, p_traceparent, p_record_time, p_headers, p_number)
         WITH ORDINALITY
         AS g(instance, message_type, idempotence_id, state, created_at, state_changed_at, with_record, cluster, topic,
              partition, "offset", key, value, traceparent, record_time, headers, sequence_number, position)
    WHERE NOT g.position = ANY (coalesce(v_stored_before, '{}'))
    ORDER BY g.position;
END
$$;

-- The signatures of V6, now without a body of their own: rows without a number.
CREATE OR REPLACE FUNCTION seqinbox_store_message(
    p_instance bigint, p_type text, p_idempotence_id text, p_state text,
    p_created_at timestamp with time zone, p_state_changed_at timestamp with time zone,
    p_with_record boolean, p_cluster text, p_topic text, p_partition integer, p_offset bigint,
    p_key bytea, p_value bytea, p_traceparent text, p_record_time timestamp with time zone,
    p_headers text) RETURNS text
    LANGUAGE sql VOLATILE AS
$$
SELECT seqinbox_store_message(p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at, p_with_record,
                              p_cluster, p_topic, p_partition, p_offset, p_key, p_value, p_traceparent, p_record_time,
                              p_headers, CAST(NULL AS bigint))
$$;

CREATE OR REPLACE FUNCTION seqinbox_store_messages(
    p_instance bigint[], p_type text[], p_idempotence_id text[], p_state text[],
    p_created_at bigint[], p_state_changed_at bigint[], p_with_record boolean[], p_cluster text[], p_topic text[],
    p_partition integer[], p_offset bigint[], p_key text[], p_value text[], p_traceparent text[],
    p_record_time bigint[], p_headers text[]) RETURNS void
    LANGUAGE sql VOLATILE AS
$$
SELECT seqinbox_store_messages(p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at, p_with_record,
                               p_cluster, p_topic, p_partition, p_offset, p_key, p_value, p_traceparent, p_record_time,
                               p_headers, array_fill(CAST(NULL AS bigint), ARRAY[cardinality(p_type)]))
$$;
