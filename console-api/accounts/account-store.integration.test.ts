// insertAccount's aff_code retry: a collision with an existing account's code takes the next code, in a
// transaction too (registration and sign-on create accounts inside one), where a failed INSERT would
// have aborted the transaction and every retry after it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';
import { ConsoleError } from '../http/errors.js';
import { AFF_CODE_LENGTH, generateAffCode, insertAccount } from './account-store.js';

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness();
});
afterAll(async () => {
  await h?.close();
});

/** The codes to hand out, in order. */
function codes(...list: string[]): () => string {
  let i = 0;
  return () => list[Math.min(i++, list.length - 1)]!;
}
const account = () => ({ username: uniqueName(), passwordHash: 'x' });
const usersNamed = async (username: string) => Number((await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE username = ${username}`)[0]!.n);

describe('insertAccount', () => {
  // Every creator (registration, sign-on with a provider's `name` claim of spaces) gets the username
  // for a blank display name, never the spaces.
  it.each([undefined, '', '   ', '\u3000'])('stores the username as the display name %j', async (displayName) => {
    const input = account();
    const row = await insertAccount(h.sql, { ...input, ...(displayName === undefined ? {} : { displayName }) });
    expect(row.display_name).toBe(input.username);
  });

  it('stores a display name as given otherwise', async () => {
    const row = await insertAccount(h.sql, { ...account(), displayName: ' Ana ' });
    expect(row.display_name).toBe(' Ana ');
  });

  it('takes the next code when the first is taken, inside a transaction, and the transaction goes on', async () => {
    const taken = await insertAccount(h.sql, account(), codes('TAKEN1'));
    expect(taken.aff_code).toBe('TAKEN1');
    const input = account();
    const { row, after } = await h.sql.begin(async (tx) => {
      const created = await insertAccount(tx, input, codes('TAKEN1', 'FRESH1'));
      const [again] = await tx<{ id: number }[]>`SELECT id FROM users WHERE username = ${input.username}`;
      return { row: created, after: again };
    });
    expect(row.aff_code).toBe('FRESH1');
    expect(Number(after!.id)).toBe(Number(row.id));
    const [stored] = await h.sql<{ aff_code: string }[]>`SELECT aff_code FROM users WHERE id = ${row.id}`;
    expect(stored!.aff_code).toBe('FRESH1');
  });

  it('gives up with an error after repeated collisions, leaving nothing inserted', async () => {
    await insertAccount(h.sql, account(), codes('TAKEN2'));
    const input = account();
    await expect(h.sql.begin((tx) => insertAccount(tx, input, codes('TAKEN2')))).rejects.toThrow(/aff_code/);
    expect(await usersNamed(input.username)).toBe(0);
  });

  it('still answers USERNAME_TAKEN for a taken username, whether or not its code collides too', async () => {
    const first = account();
    await insertAccount(h.sql, first, codes('TAKEN3'));
    for (const next of [codes('OTHER3'), codes('TAKEN3', 'OTHER4')]) {
      const err = await h.sql.begin((tx) => insertAccount(tx, first, next)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConsoleError);
      expect((err as ConsoleError).code).toBe('USERNAME_TAKEN');
    }
    expect(await usersNamed(first.username)).toBe(1);
  });

  it('generates codes of the alphabet by default', async () => {
    const row = await insertAccount(h.sql, account());
    expect(row.aff_code).toMatch(new RegExp(`^[A-Za-z2-9]{${AFF_CODE_LENGTH}}$`));
    expect(generateAffCode()).toHaveLength(AFF_CODE_LENGTH);
  });
});
