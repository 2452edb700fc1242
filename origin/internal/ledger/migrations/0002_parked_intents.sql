-- Intents Postgres refused for good (a bug, never input): kept here with the
-- reason, out of the writer's way, for a person to look at. Each is also in
-- applied_intents, so it is never applied later by accident.
CREATE TABLE parked_intents (
    sale_id    text        NOT NULL,
    intent_id  text        NOT NULL,
    kind       text        NOT NULL,
    body       jsonb       NOT NULL,
    reason     text        NOT NULL,
    parked_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sale_id, intent_id)
);
