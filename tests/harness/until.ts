// Waits for a condition a test cannot be told about (a billing round, a reconnect, a reaper's turn):
// `probe` is asked every 50 ms until it answers something truthy, which is returned; a probe that
// throws counts as not yet (a server restarting). Past `ms` the test fails naming what it waited for.
export async function until<T>(what: string, probe: () => Promise<T> | T, ms = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await Promise.resolve().then(probe).catch(() => null);
    if (got) return got as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
