-- The serializable peer's books, in a schema of its own: one row per SKU on
-- sale, one per unit sold.
--
-- stock has no CHECK (available >= 0) on purpose: SERIALIZABLE isolation
-- alone must keep a read-then-decrement from selling a unit twice, and the
-- package's tests check that it does.
CREATE TABLE stock (
    sale_id   text    NOT NULL,
    sku       text    NOT NULL,
    total     integer NOT NULL,
    available integer NOT NULL,
    PRIMARY KEY (sale_id, sku)
);

-- orders has no uniqueness on account or idempotency key: the textbook
-- design checks neither, it only records them.
CREATE TABLE orders (
    order_id        bigserial   PRIMARY KEY,
    sale_id         text        NOT NULL,
    sku             text        NOT NULL,
    account_id      text        NOT NULL,
    idempotency_key text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
