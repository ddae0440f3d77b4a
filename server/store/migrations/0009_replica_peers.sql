-- Where each replica answers the others (its peer URL), by the name it
-- records in key_owners.owner: a replica that receives a BTC drip while
-- another holds the Bitcoin key forwards the drip there (server/peer).
CREATE TABLE replica_peers (
    owner      TEXT   NOT NULL PRIMARY KEY,
    peer_url   TEXT   NOT NULL,
    updated_at BIGINT NOT NULL
);
