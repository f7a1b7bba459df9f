// The embedded ClickHouse's defaults, in a module of their own: infra/config.ts declares them as the
// defaults of its variables, and local-server.ts uses them when started without a config (tests),
// but config must not import local-server.ts, which loads the chdb engine.

/** Four statements at once: more than the cores of a small machine, so a short read never queues behind a long one. */
export const DEFAULT_LOCAL_CONNECTIONS = 4;

/** The engine's cache of decompressed blocks, MiB: the console's log reads hit it (docs/log-query-plans.md). */
export const DEFAULT_LOCAL_UNCOMPRESSED_CACHE_MB = 256;
