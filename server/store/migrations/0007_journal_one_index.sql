-- The journal keeps only its primary key: every read and delete names the
-- key, whose entries (key_address, txid) already groups, and a key has a few
-- dozen in flight at most. The (key_address, seq) index of 0006 made each
-- write update two b-trees for no query that needed it.
DROP INDEX IF EXISTS journal_key_seq;
