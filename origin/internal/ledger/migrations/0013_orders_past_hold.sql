-- A provider's payment page can outlive its order's hold (Stripe's Checkout
-- Sessions live 30 minutes at least, Razorpay's links 15): the reconciler
-- closes the page once the hold has ended (OrdersPastHold) and records when,
-- so that it closes each page once. The partial index holds only the orders
-- whose page may still be open.
ALTER TABLE orders ADD COLUMN page_closed_at timestamptz;
CREATE INDEX orders_open_pages ON orders (hold_until)
    WHERE intent_id IS NOT NULL AND page_closed_at IS NULL AND status IN ('pending_payment', 'cancelled');
