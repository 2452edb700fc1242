-- The serving ceiling follows the admission settings down (docs/FAIRNESS.md,
-- "When Redis loses the line"): a restore resumes the cursor at it, so it is
-- kept within about two seconds of admissions of the cursor, and at the
-- cursor while paused. serving_raised is the highest serving ceiling raised
-- at the current settings version (each settings change resets it): an
-- edge's report of a lower ceiling in Redis never brings serving_ceiling
-- below it, since that raise may reach Redis after the report was read.
ALTER TABLE sale_lines ADD COLUMN serving_raised bigint NOT NULL DEFAULT 0 CHECK (serving_raised >= 0);
