-- Every admin change other than a sale's admission settings (those are in
-- admission_changes), as ops made it through an edge: who (the actor the
-- edge names: which admin token, from where, and the operator's name if
-- the dashboard gave one), when, what ('defences', 'tarpit_release', ...)
-- and the state before and after as the edge sent it (NULL: none, such as
-- a released tarpit entry after). The edge records a change here before it
-- makes it, and a '<what>_failed' entry when it then could not. The ops
-- dashboard shows them, newest first (by id, the primary key).
CREATE TABLE admin_changes (
    id     bigserial   PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    actor  text        NOT NULL,
    what   text        NOT NULL,
    before jsonb,
    after  jsonb
);
