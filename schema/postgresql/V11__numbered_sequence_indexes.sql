-- seqinbox: each statement on its own, outside a transaction
-- seqinbox schema version 11: the indexes of numbered sequences (V10's columns), partial so that
-- only numbered rows enter them: a store without numbered sequences keeps them empty. Built with
-- CREATE INDEX CONCURRENTLY as V7 (writers go on meanwhile); safe to run again.

-- V10's check of an instance's pending action, validated under a lock that lets writers go on
ALTER TABLE sequence_instance VALIDATE CONSTRAINT sequence_instance_pending_action_check;

-- last_released_number: an instance's highest PROCESSED number, read backwards in one descent
DROP INDEX CONCURRENTLY IF EXISTS sequenced_message_processed_number;
CREATE INDEX CONCURRENTLY sequenced_message_processed_number ON sequenced_message (sequence_instance_id, sequence_number)
    WHERE state = 'PROCESSED' AND sequence_number IS NOT NULL;

-- waiting_numbered: an instance's WAITING numbered rows from a number on, by number then id
DROP INDEX CONCURRENTLY IF EXISTS sequenced_message_waiting_number;
CREATE INDEX CONCURRENTLY sequenced_message_waiting_number ON sequenced_message (sequence_instance_id, sequence_number, id)
    WHERE state = 'WAITING' AND sequence_number IS NOT NULL;

-- stalled_numbered: per instance, in id order, when its oldest WAITING numbered row was stored
DROP INDEX CONCURRENTLY IF EXISTS sequenced_message_waiting_number_since;
CREATE INDEX CONCURRENTLY sequenced_message_waiting_number_since ON sequenced_message (sequence_instance_id, created_at)
    WHERE state = 'WAITING' AND sequence_number IS NOT NULL;
