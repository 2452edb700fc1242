-- A refund the provider has taken ('issued') may give the money back days
-- later (a bank's normal refund), or fail. refunded_at is when the provider
-- reported the money back; a refund that failed makes the order owe it
-- again, and refund_id keeps the failed refund's id, from which the next
-- refund's idempotency key is derived. Refunds issued before this migration
-- were recorded only once they had succeeded.
ALTER TABLE orders ADD COLUMN refunded_at timestamptz;
UPDATE orders SET refunded_at = updated_at WHERE refund_status = 'issued';
-- The refunds still on their way, for the reconciler to ask about.
CREATE INDEX orders_refunds_in_flight ON orders (updated_at)
    WHERE refund_status = 'issued' AND refunded_at IS NULL;
