// The server a connection URL names, as said to an operator: `host:port` only, never the URL's user
// information (a password) nor its query. For the one-line start failures of the entry points
// (infra/migrate-main.ts, console-api/main.ts).

/** `host:port` of `url` (`defaultPort` when it names none; a postgres URL's `?host=` when its host is empty). */
export function serverAddress(url: string, defaultPort: number): string {
  try {
    const u = new URL(url);
    const host = u.hostname || u.searchParams.get('host') || 'localhost';
    return `${host}:${u.port || defaultPort}`;
  } catch {
    return '(unparsable URL)';
  }
}
