-- Every change of a sale's admission settings, as ops made it: who (the
-- actor the edge names: which admin token, from where, and the operator's
-- name if the dashboard gave one), when, and the settings before and
-- after, written in the same transaction as the change. The ops dashboard
-- shows them, newest first.
CREATE TABLE admission_changes (
    id                    bigserial   PRIMARY KEY,
    sale_id               text        NOT NULL REFERENCES sales (sale_id),
    at                    timestamptz NOT NULL DEFAULT now(),
    actor                 text        NOT NULL,
    settings_version      bigint      NOT NULL,
    rate_before           double precision NOT NULL,
    rate_after            double precision NOT NULL,
    paused_before         boolean     NOT NULL,
    paused_after          boolean     NOT NULL,
    challenge_bits_before integer     NOT NULL,
    challenge_bits_after  integer     NOT NULL
);
CREATE INDEX admission_changes_by_sale ON admission_changes (sale_id, id DESC);
