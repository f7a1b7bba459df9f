-- Back to ClickHouse's ordinary merge policy for `logs`: migration 002 made every partition whose parts
-- were all older than 60 s merge into one part, to keep `logs FINAL` cheap for the console's queries.
-- Those queries no longer read FINAL (009, console-api/logs/log-query.ts: stats from log_stats_15m,
-- replays dropped in key order), so the forced merge only cost CPU: after every quiet minute it
-- rewrote the month that changed (a 7.6 M-row month of the bench's 10 M rows: ~1-2 minutes of a core
-- on the embedded server, loaded), on the cores the relay and billing share. Replays still collapse
-- in the ordinary merges. Metadata only.
ALTER TABLE logs RESET SETTING min_age_to_force_merge_seconds, min_age_to_force_merge_on_partition_only
