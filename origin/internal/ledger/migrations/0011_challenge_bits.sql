-- The proof-of-work difficulty ops set for a sale's joins (issue 28): a
-- join must carry a solved challenge with at least this many leading zero
-- bits (edge/internal/challenge); 0 asks for none. It is an admission
-- setting like the rate and the pause: versioned with them, kept here
-- first, restored with the line.
ALTER TABLE sale_lines ADD COLUMN challenge_bits integer NOT NULL DEFAULT 0 CHECK (challenge_bits BETWEEN 0 AND 32);
