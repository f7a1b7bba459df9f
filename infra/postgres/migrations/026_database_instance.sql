-- A random id of this database, made once with it. Redis records the id of the database whose
-- accounts its balance mirrors, usage stream and reservations belong to (core/quota/database-binding.ts):
-- a database dropped and made again (ids from 1 again) next to a Redis that kept the old one's
-- mirrors had its new accounts spend the old accounts' balances.
CREATE TABLE IF NOT EXISTS database_instance (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  id uuid NOT NULL DEFAULT gen_random_uuid(),
  created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO database_instance DEFAULT VALUES ON CONFLICT DO NOTHING;
