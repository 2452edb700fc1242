-- An intent is also identified by what it does: each reservation has at most
-- one reserve and one expire. Deduplicating on that too keeps a repeated
-- stream id (a Redis failover onto a host whose clock runs behind) from
-- passing a fresh intent off as one already applied, and a re-sent intent
-- under a new id from applying twice.
ALTER TABLE applied_intents ADD COLUMN reservation_id text;
CREATE UNIQUE INDEX applied_intents_one_per_reservation_and_kind
    ON applied_intents (sale_id, reservation_id, kind);
