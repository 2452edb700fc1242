-- The reserve journal's reference to sales is checked by the one statement
-- that writes it (ledger.RecordGrants): each row is inserted only for a sale
-- that statement reads and locks FOR SHARE, under its current epoch, and no
-- sale is ever deleted. The foreign key checked the same thing again, row by
-- row, in a trigger: about a third of the Postgres CPU of journaling a grant
-- (docs/BENCHMARKS.md, "The reserve journal's cost"), paid before every 201.
ALTER TABLE reserve_journal DROP CONSTRAINT reserve_journal_sale_id_fkey;
