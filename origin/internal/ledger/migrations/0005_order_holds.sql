-- How long an order's hold lives once its payment started (the hold's
-- expiry plus the grace, given once). Redis has it first; Postgres keeps it
-- so a rebuild of Redis from Postgres keeps the grace too.
ALTER TABLE orders ADD COLUMN hold_until timestamptz;
