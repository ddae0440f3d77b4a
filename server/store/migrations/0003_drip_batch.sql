-- A drip paid by a send-many call shares its txid with the other drips of
-- the batch; batch is how many recipients that transaction pays (0 for a
-- plain transfer), so a status lookup by txid knows not to name one of them.
ALTER TABLE drips ADD COLUMN batch INTEGER NOT NULL DEFAULT 0;
