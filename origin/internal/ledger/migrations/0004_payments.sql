-- Orders and payments. An order is made when a shopper starts to pay for a
-- hold, and Redis decided that hold: the order may be written before the
-- order writer has applied the hold's reserve, so it names its reservation
-- without a foreign key (still one order per reservation).
ALTER TABLE orders DROP CONSTRAINT orders_reservation_id_fkey;
ALTER TABLE orders
    ADD COLUMN sale_id       text NOT NULL,
    ADD COLUMN sku           text NOT NULL,
    -- The payment intent at the gateway, once created.
    ADD COLUMN intent_id     text UNIQUE,
    ADD COLUMN pay_url       text,
    -- A refunded order's money: owed (decided, not yet issued) or issued.
    ADD COLUMN refund_status text CHECK (refund_status IN ('owed', 'issued')),
    ADD COLUMN refund_id     text,
    ADD COLUMN paid_at       timestamptz,
    ADD CHECK ((status = 'refunded') = (refund_status IS NOT NULL));
CREATE INDEX orders_refund_owed ON orders (updated_at) WHERE refund_status = 'owed';
CREATE INDEX orders_account ON orders (account_id);

-- Every gateway event handled, by its id: a webhook delivered twice changes
-- state once. Written in the same transaction as the state change.
CREATE TABLE payment_events (
    event_id    text        PRIMARY KEY,
    order_id    text,
    type        text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);

-- A hold whose payment failed is dropped at once.
ALTER TABLE reservations DROP CONSTRAINT reservations_cancel_reason_check;
ALTER TABLE reservations ADD CONSTRAINT reservations_cancel_reason_check
    CHECK (cancel_reason IN ('no_stock', 'account_has_live', 'payment_failed'));
