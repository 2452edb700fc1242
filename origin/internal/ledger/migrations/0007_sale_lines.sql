-- The durable copy of each sale's waiting line, which the edge keeps in
-- Redis and restores from here when Redis loses it (docs/OPERATIONS.md).
-- Edge nodes write it through the origin's /v1/lines routes.
--
-- The ceilings are high-water marks the edge raises, here first and then in
-- Redis, before it hands out anything beyond them: Redis never holds a
-- counter above them, so restoring each counter to its ceiling hands no
-- place out twice and sends no admitted shopper back to waiting. They only
-- ever rise (GREATEST).
CREATE TABLE sale_lines (
    sale_id          text             PRIMARY KEY REFERENCES sales,
    -- The pre-queue draw's seed, hex; the first edge to ask sets it and it
    -- never changes, so its published SHA-256 stays true.
    seed             text             NOT NULL CHECK (seed ~ '^[0-9a-f]{64}$'),
    rate_per_s       double precision NOT NULL CHECK (rate_per_s >= 0 AND rate_per_s <= 1000000),
    paused           boolean          NOT NULL DEFAULT false,
    -- Bumped by every settings change, so Redis keeps the latest of two
    -- changes that race (changes are ordered as they reach the origin);
    -- settings_at is when the newest change was recorded.
    settings_version bigint           NOT NULL DEFAULT 0,
    settings_at      timestamptz,
    pre_ceiling      bigint           NOT NULL DEFAULT 0 CHECK (pre_ceiling >= 0),
    post_ceiling     bigint           NOT NULL DEFAULT 0 CHECK (post_ceiling >= 0),
    serving_ceiling  bigint           NOT NULL DEFAULT 0 CHECK (serving_ceiling >= 0),
    -- The pre-queue's size at the start, which the draw permutes; set once.
    draw_size        bigint           CHECK (draw_size >= 0),
    created_at       timestamptz      NOT NULL DEFAULT now(),
    updated_at       timestamptz      NOT NULL DEFAULT now()
);
