// The stack scripts start the embedded ClickHouse only when nothing answers CLICKHOUSE_URL.
export async function isClickHouseReachable(url: string, timeoutMs = 1_000): Promise<boolean> {
  try {
    const res = await fetch(new URL('/ping', url), { signal: AbortSignal.timeout(timeoutMs) });
    const body = await res.text();
    return res.ok && body.startsWith('Ok.');
  } catch {
    return false;
  }
}
