-- seqinbox schema version 3: the record timestamp of a buffered message, restored on its replay
-- like the rest of the record (key, value, headers, origin).

ALTER TABLE sequenced_message ADD COLUMN record_time timestamp with time zone;
