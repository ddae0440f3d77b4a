-- The faucet pays more than one asset: a ledger row's and a drip's amount
-- are in the unit of their asset ('stx' in µSTX, 'sbtc' in the token's base
-- units), so each row says which. Rows from before are STX.
ALTER TABLE pending_txs ADD COLUMN asset TEXT NOT NULL DEFAULT 'stx';
ALTER TABLE drips ADD COLUMN asset TEXT NOT NULL DEFAULT 'stx';
