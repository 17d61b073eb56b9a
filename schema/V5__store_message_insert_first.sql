-- seqinbox schema version 5: seqinbox_store_message inserts first. Nearly every call stores a
-- PROCESSED row, without a record, for a key that has no row yet; that case is now one statement
-- after the advisory lock (its snapshot is taken after the lock, like the reads of version 4).
-- Every other case goes to the version 4 function, renamed seqinbox_store_message_in_full, which
-- takes the same lock again (advisory locks nest within a transaction) and decides as before.
-- Same arguments, same results.

ALTER FUNCTION seqinbox_store_message(bigint, text, text, text, timestamp with time zone,
    timestamp with time zone, boolean, text, text, integer, bigint, bytea, bytea, text,
    timestamp with time zone, text) RENAME TO seqinbox_store_message_in_full;

CREATE FUNCTION seqinbox_store_message(
    p_instance bigint, p_type text, p_idempotence_id text, p_state text,
    p_created_at timestamp with time zone, p_state_changed_at timestamp with time zone,
    p_with_record boolean, p_cluster text, p_topic text, p_partition integer, p_offset bigint,
    p_key bytea, p_value bytea, p_traceparent text, p_record_time timestamp with time zone,
    p_headers text) RETURNS text
    LANGUAGE plpgsql VOLATILE AS
$$
BEGIN
    IF NOT p_with_record THEN
        PERFORM pg_advisory_xact_lock(hashtext(p_type), hashtext(p_idempotence_id));
        INSERT INTO sequenced_message (sequence_instance_id, message_type, idempotence_id, state, created_at,
                                       state_changed_at)
        SELECT p_instance, p_type, p_idempotence_id, p_state, p_created_at, p_state_changed_at
        WHERE NOT EXISTS (SELECT 1 FROM sequenced_message
                          WHERE message_type = p_type AND idempotence_id = p_idempotence_id);
        IF FOUND THEN
            RETURN 'INSERTED';
        END IF;
    END IF;
    RETURN seqinbox_store_message_in_full(p_instance, p_type, p_idempotence_id, p_state, p_created_at,
                                          p_state_changed_at, p_with_record, p_cluster, p_topic, p_partition,
                                          p_offset, p_key, p_value, p_traceparent, p_record_time, p_headers);
END
$$;
