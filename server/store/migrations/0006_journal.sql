-- One journal for every chain (journal.Store): each transaction a faucet key
-- has in flight, Stacks or Bitcoin, recorded before it is sent so that a
-- restarted faucet sends it again byte for byte. seq is a Stacks account's
-- nonce, a Bitcoin payout's depth in its chain of unconfirmed payouts (so
-- parents list first), as uint64 bits; replaces names the entry a fee bump
-- replaces; meta is the chain's own record (what the transaction pays) as
-- JSON text.
CREATE TABLE journal (
    key_address TEXT     NOT NULL,
    txid        TEXT     NOT NULL,
    seq         BIGINT   NOT NULL,
    raw         {{blob}} NOT NULL,
    state       TEXT     NOT NULL,
    sent_at     BIGINT   NOT NULL,
    replaces    TEXT     NOT NULL,
    meta        TEXT     NOT NULL,
    PRIMARY KEY (key_address, txid)
) {{without_rowid}};
CREATE INDEX journal_key_seq ON journal (key_address, seq);

-- The Stacks ledger's rows become entries (a foreign row held no bytes).
INSERT INTO journal (key_address, txid, seq, raw, state, sent_at, replaces, meta)
SELECT sender, txid, nonce, raw, state, sent_at, '',
       CAST({{json_object}}('recipient', recipient, 'asset', asset, 'amount', amount, 'fee', fee,
                            'rebroadcasts', rebroadcasts, 'replacements', replacements) AS TEXT)
FROM pending_txs WHERE NOT is_foreign AND raw IS NOT NULL;

-- The BTC payouts' rows too: their record already is the chain's JSON; seq
-- is its depth, as the payer records it.
INSERT INTO journal (key_address, txid, seq, raw, state, sent_at, replaces, meta)
SELECT key_address, txid, COALESCE(CAST({{json_text record depth}} AS BIGINT), 0), raw, state, sent_at,
       COALESCE({{json_text record replaces}}, ''), record
FROM btc_payouts;

DROP TABLE pending_txs;
DROP TABLE btc_payouts;
