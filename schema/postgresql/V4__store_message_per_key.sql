-- seqinbox schema version 4: seqinbox_store_message, the state step of a delivery serialised per
-- claim key. The step runs in a transaction beside the claim transaction; should that one's
-- connection die before the step commits, the delivery taking the claim over and the step must
-- each find the other's row rather than add a second. The function takes a transaction-level
-- advisory lock on the key and then, being VOLATILE, reads with a fresh snapshot: a PROCESSED row
-- of the key is left as it is; WAITING rows take a PROCESSED state (the listener ran), other
-- states leave them; else the newest FAILED row takes the new state (and the record, if one is
-- given); else the row is inserted. Returns INSERTED, UPDATED or LEFT_EXISTING.

CREATE FUNCTION seqinbox_store_headers(p_message bigint, p_headers text) RETURNS void
    LANGUAGE sql VOLATILE AS
$$
INSERT INTO sequenced_message_header (sequenced_message_id, position, name, value)
SELECT p_message, CAST(h.pos AS integer) - 1, convert_from(decode(split_part(h.item, '.', 1), 'hex'), 'UTF8'),
       decode(split_part(h.item, '.', 2), 'hex')
FROM unnest(string_to_array(p_headers, ',')) WITH ORDINALITY AS h(item, pos)
$$;

CREATE FUNCTION seqinbox_store_message(
    p_instance bigint, p_type text, p_idempotence_id text, p_state text,
    p_created_at timestamp with time zone, p_state_changed_at timestamp with time zone,
    p_with_record boolean, p_cluster text, p_topic text, p_partition integer, p_offset bigint,
    p_key bytea, p_value bytea, p_traceparent text, p_record_time timestamp with time zone,
    p_headers text) RETURNS text
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
        UPDATE sequenced_message SET state = p_state, state_changed_at = p_state_changed_at WHERE id = v_id;
        IF p_with_record THEN
            UPDATE sequenced_message
            SET cluster = p_cluster, topic = p_topic, partition = p_partition, "offset" = p_offset, key = p_key,
                value = p_value, traceparent = p_traceparent, record_time = p_record_time
            WHERE id = v_id;
            DELETE FROM sequenced_message_header WHERE sequenced_message_id = v_id;
            PERFORM seqinbox_store_headers(v_id, p_headers);
        END IF;
        RETURN 'UPDATED';
    END IF;
    IF p_with_record THEN
        INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,
                                       state_changed_at, cluster, topic, partition, "offset", key, value,
                                       traceparent, record_time)
        VALUES (p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at, p_cluster, p_topic,
                p_partition, p_offset, p_key, p_value, p_traceparent, p_record_time)
        RETURNING id INTO v_id;
        PERFORM seqinbox_store_headers(v_id, p_headers);
    ELSE
        INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,
                                       state_changed_at)
        VALUES (p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at);
    END IF;
    RETURN 'INSERTED';
END
$$;
