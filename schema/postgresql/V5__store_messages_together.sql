-- seqinbox schema version 5: seqinbox_store_messages, seqinbox_store_message for many rows of
-- distinct keys in one call (a batch's rows, sent with its commit). The advisory locks are taken
-- in key order; a key that has rows already is stored by seqinbox_store_message as ever, the
-- others are inserted together with their headers. Keys, values and times travel as the client
-- sends them: hex text and microseconds since the epoch. Returns nothing: the caller stores only
-- rows whose outcome it knows.

CREATE FUNCTION seqinbox_store_messages(
    p_instance bigint[], p_type text[], p_idempotence_id text[], p_state text[],
    p_created_at bigint[], p_state_changed_at bigint[], p_with_record boolean[], p_cluster text[], p_topic text[],
    p_partition integer[], p_offset bigint[], p_key text[], p_value text[], p_traceparent text[],
    p_record_time bigint[], p_headers text[]) RETURNS void
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
                                       TIMESTAMPTZ 'epoch' + g.record_time * INTERVAL '1 microsecond', g.headers)
        FROM unnest(p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at, p_with_record, p_cluster,
                    p_topic, p_partition, p_offset, p_key, p_value, p_traceparent, p_record_time, p_headers) WITH ORDINALITY
             AS g(instance, message_type, idempotence_id, state, created_at, state_changed_at, with_record, cluster, topic,
                  partition, "offset", key, value, traceparent, record_time, headers, position)
        WHERE g.position = ANY (v_stored_before)
        ORDER BY g.position;
    END IF;

    WITH given AS (
        SELECT g.* FROM unnest(p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at, p_with_record,
                               p_cluster, p_topic, p_partition, p_offset, p_key, p_value, p_traceparent, p_record_time,
                               p_headers) WITH ORDINALITY
             AS g(instance, message_type, idempotence_id, state, created_at, state_changed_at, with_record, cluster, topic,
                  partition, "offset", key, value, traceparent, record_time, headers, position)
        WHERE NOT g.position = ANY (coalesce(v_stored_before, '{}'))
    ), inserted AS (
        INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at, state_changed_at,
                                       cluster, topic, partition, "offset", key, value, traceparent, record_time)
        SELECT instance, message_type, idempotence_id, state,
               TIMESTAMPTZ 'epoch' + created_at * INTERVAL '1 microsecond',
               TIMESTAMPTZ 'epoch' + state_changed_at * INTERVAL '1 microsecond',
               CASE WHEN with_record THEN cluster END, CASE WHEN with_record THEN topic END,
               CASE WHEN with_record THEN partition END, CASE WHEN with_record THEN "offset" END,
               CASE WHEN with_record THEN decode(key, 'hex') END, CASE WHEN with_record THEN decode(value, 'hex') END,
               CASE WHEN with_record THEN traceparent END,
               CASE WHEN with_record THEN TIMESTAMPTZ 'epoch' + record_time * INTERVAL '1 microsecond' END
        FROM given ORDER BY position
        RETURNING id, message_type, idempotence_id
    )
    INSERT INTO sequenced_message_header (sequenced_message_id, position, name, value)
    SELECT i.id, CAST(h.pos AS integer) - 1, convert_from(decode(split_part(h.item, '.', 1), 'hex'), 'UTF8'),
           decode(split_part(h.item, '.', 2), 'hex')
    FROM inserted i
    JOIN given g ON g.message_type = i.message_type AND g.idempotence_id = i.idempotence_id AND g.with_record
    CROSS JOIN LATERAL unnest(string_to_array(g.headers, ',')) WITH ORDINALITY AS h(item, pos);
END
$$;
