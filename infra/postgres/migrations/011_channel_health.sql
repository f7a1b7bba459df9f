-- Channel health (issue 13): why and when a channel's status last changed, what its last probe found,
-- when the next is due, and per-channel overrides of the automatic-disabling thresholds.
--
-- status_time is also the relays' fault-counting epoch: faults recorded before it no longer count
-- (relay/routing/lua/recordChannelOutcome-2.lua), so a channel re-enabled by a probe or an
-- administrator starts with a clean slate. status_notified_time trails status_time until the health
-- worker (console-api/channels/channel-prober.ts) has sent the operator webhook for the change.
ALTER TABLE channels
  ADD COLUMN IF NOT EXISTS status_reason        TEXT   NOT NULL DEFAULT '',
  ADD COLUMN IF NOT EXISTS status_time          BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS status_notified_time BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS probe_time           BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS probe_result         TEXT   NOT NULL DEFAULT '',
  ADD COLUMN IF NOT EXISTS probe_failures       INT    NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS next_probe_time      BIGINT NOT NULL DEFAULT 0,
  -- false: never disabled automatically (faults are still counted in the metrics).
  ADD COLUMN IF NOT EXISTS auto_ban             BOOLEAN NOT NULL DEFAULT true,
  -- NULL: the fleet's setting (CHANNEL_FAULTS_TO_DISABLE, CHANNEL_FAULT_RATE_TO_DISABLE); 0: that rule off.
  ADD COLUMN IF NOT EXISTS fault_threshold      INT NULL,
  ADD COLUMN IF NOT EXISTS fault_rate_threshold DOUBLE PRECISION NULL;

-- The prober's scan: only automatically disabled channels, by due time.
CREATE INDEX IF NOT EXISTS channels_probe_due ON channels (next_probe_time) WHERE status = 3;
