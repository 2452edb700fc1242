-- The sale ledger: Postgres has the last word on stock.

CREATE TABLE sales (
    sale_id           text        PRIMARY KEY,
    name              text        NOT NULL,
    starts_at         timestamptz NOT NULL,
    ends_at           timestamptz NOT NULL,
    hold_ttl_s        integer     NOT NULL CHECK (hold_ttl_s > 0),
    per_account_limit integer     NOT NULL CHECK (per_account_limit = 1),
    created_at        timestamptz NOT NULL DEFAULT now(),
    CHECK (ends_at > starts_at)
);

CREATE TABLE skus (
    sale_id     text    NOT NULL REFERENCES sales,
    sku         text    NOT NULL,
    name        text    NOT NULL,
    price_minor bigint  NOT NULL CHECK (price_minor >= 0),
    currency    text    NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    PRIMARY KEY (sale_id, sku)
);

-- One row per SKU; the CHECK is the invariant every change must keep.
CREATE TABLE inventory (
    sale_id   text    NOT NULL,
    sku       text    NOT NULL,
    total     integer NOT NULL,
    available integer NOT NULL,
    held      integer NOT NULL,
    sold      integer NOT NULL,
    PRIMARY KEY (sale_id, sku),
    FOREIGN KEY (sale_id, sku) REFERENCES skus,
    CHECK (available >= 0 AND held >= 0 AND sold >= 0 AND available + held + sold = total)
);

CREATE TABLE reservations (
    reservation_id  text        PRIMARY KEY,
    sale_id         text        NOT NULL,
    sku             text        NOT NULL,
    account_id      text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('held', 'paid', 'expired', 'cancelled')),
    -- Why Postgres refused a reserve: no_stock, or account_has_live.
    cancel_reason   text        CHECK (cancel_reason IN ('no_stock', 'account_has_live')),
    idempotency_key text        NOT NULL,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (sale_id, sku) REFERENCES skus
);

-- One live (held or paid) reservation per account per sale.
CREATE UNIQUE INDEX reservations_one_live_per_account
    ON reservations (sale_id, account_id) WHERE status IN ('held', 'paid');

CREATE TABLE orders (
    order_id        text        PRIMARY KEY,
    reservation_id  text        NOT NULL UNIQUE REFERENCES reservations,
    account_id      text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('pending_payment', 'paid', 'refunded', 'cancelled')),
    amount_minor    bigint      NOT NULL CHECK (amount_minor >= 0),
    currency        text        NOT NULL,
    idempotency_key text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Every intent applied, by its stream id: applying one twice is a no-op.
CREATE TABLE applied_intents (
    sale_id    text        NOT NULL,
    intent_id  text        NOT NULL,
    kind       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sale_id, intent_id)
);
