-- The edges' signed line requests the origins have taken (docs/OPERATIONS.md,
-- "The line routes"): one row per signature, so that a request sent again is
-- refused by every origin sharing this database, after a restart too. A row
-- is kept past until, the last instant any origin takes its signature as in
-- time, and then deleted a few at a time by the inserts that follow
-- (Store.TakeSignature).
CREATE TABLE line_signatures (
    signature text        PRIMARY KEY, -- tokens.RequestSignature.Key: kid and MAC
    until     timestamptz NOT NULL,
    taken_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX line_signatures_until ON line_signatures (until);
