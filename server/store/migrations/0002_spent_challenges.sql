-- Proof-of-work challenges already used (replay protection shared by the
-- replicas of one store), each kept until its expiry in Unix nanoseconds and
-- then pruned. The same placeholders as 0001 (see migrate.go).
CREATE TABLE spent_challenges (
    id         TEXT   PRIMARY KEY,
    expires_at BIGINT NOT NULL
) {{without_rowid}};
CREATE INDEX spent_challenges_expires_at ON spent_challenges (expires_at);
