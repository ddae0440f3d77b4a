-- The faucet's durable state. Shared by SQLite and Postgres: the double-brace
-- placeholders are the only per-dialect parts (see migrate.go). Times are Unix
-- nanoseconds and µSTX amounts and nonces are uint64 stored bit for bit in
-- a signed 64-bit integer, so both drivers keep them exactly.

-- In-flight transactions per faucet key (faucet.Ledger).
CREATE TABLE pending_txs (
    sender       TEXT    NOT NULL,
    nonce        BIGINT  NOT NULL,
    txid         TEXT    NOT NULL,
    raw          {{blob}},
    recipient    TEXT    NOT NULL,
    amount       BIGINT  NOT NULL,
    fee          BIGINT  NOT NULL,
    sent_at      BIGINT  NOT NULL,
    state        TEXT    NOT NULL,
    is_foreign   BOOLEAN NOT NULL,
    rebroadcasts INTEGER NOT NULL,
    replacements INTEGER NOT NULL,
    PRIMARY KEY (sender, nonce)
) {{without_rowid}};

-- Rate-limit slots: an exact sliding-window log (faucet.Limiter). Ids are
-- never reused, so releasing a reservation twice cannot free another's slot.
CREATE TABLE limit_slots (
    id         {{autoid}},
    bucket     TEXT   NOT NULL,
    at         BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX limit_slots_bucket_at ON limit_slots (bucket, at);
CREATE INDEX limit_slots_expires_at ON limit_slots (expires_at);

-- Every answered drip (faucet.History), pruned after the retention period.
CREATE TABLE drips (
    id            {{rowid}},
    at            BIGINT  NOT NULL,
    recipient     TEXT    NOT NULL,
    stacking      BOOLEAN NOT NULL,
    amount        BIGINT  NOT NULL,
    fee           BIGINT  NOT NULL,
    txid          TEXT    NOT NULL,
    sender        TEXT    NOT NULL,
    nonce         BIGINT  NOT NULL,
    outcome       TEXT    NOT NULL,
    client_bucket TEXT    NOT NULL
);
CREATE INDEX drips_at ON drips (at);
CREATE INDEX drips_txid ON drips (txid);

-- Fencing epochs of key ownership (Postgres replicas only; unused on SQLite).
CREATE TABLE key_owners (
    key   TEXT   PRIMARY KEY,
    epoch BIGINT NOT NULL,
    owner TEXT   NOT NULL
);
