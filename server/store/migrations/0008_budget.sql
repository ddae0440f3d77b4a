-- Outflow budgets (guard.Budget): what each budget pool paid per step of
-- its sliding window. A drip adds its amount to the current step of its
-- pools in the same transaction as its rate-limit slots; a failed drip
-- takes it back. A row is pruned once its step has left the window
-- (expires_at), so a pool holds about 60 rows.
CREATE TABLE budget_steps (
    pool       TEXT   NOT NULL,
    step       BIGINT NOT NULL,
    amount     BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (pool, step)
) {{without_rowid}};
CREATE INDEX budget_steps_expires_at ON budget_steps (expires_at);
