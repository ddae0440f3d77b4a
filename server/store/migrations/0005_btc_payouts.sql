-- BTC payouts not yet confirmed (btcfaucet.Ledger), per faucet key: the
-- signed bytes recorded before the broadcast, so a restarted faucet sends
-- them again byte for byte. record holds the rest (coins spent, drips paid,
-- change, chain depth) as JSON; state and sent_at are columns for queries.
CREATE TABLE btc_payouts (
    key_address TEXT   NOT NULL,
    txid        TEXT   NOT NULL,
    raw         {{blob}} NOT NULL,
    record      TEXT   NOT NULL,
    state       TEXT   NOT NULL,
    sent_at     BIGINT NOT NULL,
    PRIMARY KEY (key_address, txid)
) {{without_rowid}};
