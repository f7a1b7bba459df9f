-- log_keys takes its inserts as RocksDB write batches instead of one SST file per insert: the
-- counterpart of migrations/011 (the reason is there). log_keys is local to each host, so the
-- setting is changed on every host of the cluster.
ALTER TABLE log_keys ON CLUSTER '{cluster}' MODIFY SETTING optimize_for_bulk_insert = 0
