-- The reserve journal: every reserve Redis granted, written here in a batch
-- before the shopper hears 201 (or 200 for a repeat). Redis may lose a
-- granted hold with its intent (a restart without persistence, a FLUSHALL,
-- a failover to a replica that lagged); the journal may not. A rebuild
-- replays the rows the order writer never applied, and restores burned
-- admission tokens and idempotency keys from it.
CREATE TABLE reserve_journal (
    reservation_id  text        PRIMARY KEY,
    sale_id         text        NOT NULL REFERENCES sales,
    sku             text        NOT NULL,
    account_id      text        NOT NULL,
    idempotency_key text        NOT NULL,
    token_id        text        NOT NULL, -- the admission token's jti, burned by the reserve
    -- Where Redis numbered it: the sale's epoch in Redis when granted, and
    -- its place in that epoch's sequence of granted reserves.
    epoch           text        NOT NULL,
    seq             bigint      NOT NULL,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    journaled_at    timestamptz NOT NULL DEFAULT now()
);
-- A sequence number is granted once per epoch: a Redis that numbers a grant
-- again (a replica promoted before it had the last grants) cannot journal it.
CREATE UNIQUE INDEX reserve_journal_by_sequence ON reserve_journal (sale_id, epoch, seq);

-- The epoch Redis holds for a sale, as the origin last wrote it. A Redis
-- epoch that differs, or none, means Redis lost (or never had) the sale's
-- state; a Redis sequence behind the journal's means it lost its latest
-- writes (a failover).
-- The Redis server's replication id when the epoch was written: a failover or
-- a restart gives Redis a new one, and then what it holds is rebuilt.
ALTER TABLE sales ADD COLUMN redis_epoch text;
ALTER TABLE sales ADD COLUMN redis_replid text;

-- Each time an origin found that Redis had lost a sale's state, and what the
-- rebuild that followed did about it.
CREATE TABLE redis_losses (
    loss_id       bigserial   PRIMARY KEY,
    sale_id       text        NOT NULL REFERENCES sales,
    detected_at   timestamptz NOT NULL DEFAULT now(),
    kind          text        NOT NULL CHECK (kind IN ('state_missing', 'epoch_foreign', 'sequence_behind', 'server_replaced')),
    epoch         text        NOT NULL, -- the epoch Postgres expected
    redis_epoch   text        NOT NULL, -- what Redis had ('' for none)
    redis_seq     bigint      NOT NULL,
    journal_seq   bigint      NOT NULL, -- the highest sequence journaled in the expected epoch
    restored      integer     NOT NULL DEFAULT 0, -- journaled holds the rebuild put back
    lost          integer     NOT NULL DEFAULT 0, -- journaled holds Postgres could not take back (cancelled)
    rebuilt_at    timestamptz
);
