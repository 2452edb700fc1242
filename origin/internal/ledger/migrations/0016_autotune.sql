-- Admission that tunes itself (origin/internal/autotune): while autotune is
-- on, one origin sets the sale's rate from what the back end shows, within
-- the bounds ops set; a rate set by hand switches it off.
ALTER TABLE sale_lines
    ADD COLUMN autotune     boolean          NOT NULL DEFAULT false,
    ADD COLUMN autotune_min double precision NOT NULL DEFAULT 0 CHECK (autotune_min >= 0),
    ADD COLUMN autotune_max double precision NOT NULL DEFAULT 0 CHECK (autotune_max >= 0),
    ADD CHECK (NOT autotune OR (autotune_min <= autotune_max AND autotune_max > 0));
-- Each admission change says whether the rate tuned itself before and after.
ALTER TABLE admission_changes
    ADD COLUMN autotune_before boolean NOT NULL DEFAULT false,
    ADD COLUMN autotune_after  boolean NOT NULL DEFAULT false;
