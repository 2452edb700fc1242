-- One unit per payer (docs/FAIRNESS.md): a scalper can open many accounts
-- but rarely has as many bank accounts. The gateway reports the instrument
-- that paid (a UPI VPA, a card fingerprint); in a sale with the rule on, a
-- second order paid by the same instrument is not sold: its hold is
-- released and its money refunded.
--
-- Whether a sale has the rule is part of its definition. The API's default
-- for a new sale is on; sales made before this migration keep the rules
-- they were created under (off).
ALTER TABLE sales ADD COLUMN one_unit_per_payer boolean NOT NULL DEFAULT false;

-- The instrument that paid for an order, as the gateway reported it; NULL
-- until a payment succeeds, and when the gateway reports none.
ALTER TABLE orders ADD COLUMN payer text CHECK (payer <> '');

-- The rule itself: each payer that has bought in a sale with the rule on,
-- and the paid order it bought with. A payment claims its payer in the
-- transaction that marks its order paid, before Redis sells the unit, so the
-- primary key decides between two payments of one payer that settle at
-- once: the second waits for the first's transaction and, if it commits,
-- finds the payer taken. An order that leaves paid (or never gets there)
-- drops its claim in the transaction that says so.
CREATE TABLE sale_payers (
    sale_id    text        NOT NULL REFERENCES sales,
    payer      text        NOT NULL CHECK (payer <> ''),
    order_id   text        NOT NULL REFERENCES orders,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sale_id, payer)
);
CREATE INDEX sale_payers_order ON sale_payers (order_id);
