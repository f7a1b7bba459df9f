// A cache reload is a read, then an install. The relay reloads its channels and options on every
// invalidation and every 10 s, and two reloads can overlap on different database connections: the
// one that began first (an older snapshot) may resolve last and overwrite the newer state, so a
// channel just disabled kept being routed to, or a price just changed kept being billed at the old
// one, until the next periodic reload. KeyDirectory guards its own entries the same way (#generation).

/**
 * `read` then `install`, where a read that resolves after a later-begun read has installed is
 * dropped: what is installed is always at least as new as what is installed already.
 */
export function latestReadWins<T>(read: () => Promise<T>, install: (value: T) => void): () => Promise<void> {
  let begun = 0;
  let installed = 0;
  return async () => {
    const ticket = ++begun;
    const value = await read();
    if (ticket < installed) return;
    installed = ticket;
    install(value);
  };
}
