// A GroupRatio write that drops a group, at the same moment as administrators place an account or a
// channel in that group. Each side checks the other (GroupRatio keeps the groups in use; an account's
// or a channel's group must be one of GroupRatio), so exactly one may win. The group writers checked
// before their transaction, without the option lock: all of them answered 200 and the account was left
// in a group with no price (its own requests refused) and the channel in a group GroupRatio lacks
// (every later GroupRatio write refused). Review finding F3 (admin-api).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleHarness, type TestAccount, startConsoleHarness, uniqueName } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
let admin: TestAccount;
let root: TestAccount;
beforeAll(async () => {
  h = await startConsoleHarness();
  admin = await h.account({ role: 10 });
  root = await h.account({ role: 100 });
});
afterAll(async () => {
  await h?.close();
});

const BASE = { default: 1, vip: 1, svip: 1 };
const inject = (method: 'POST' | 'PUT', url: string, payload: object) => h.app.inject({ method, url, headers: admin.auth, payload });

describe('GroupRatio dropping a group races the writers that place accounts and channels in it', () => {
  it('never leaves an account or a channel in a group GroupRatio lacks', async () => {
    const setGroupTarget = await h.account();
    const editTarget = await h.account();
    const made = await inject('POST', '/api/channel/', { name: 'moved', base_url: 'https://api.example.com', key: 'k', models: 'm' });
    expect(made.statusCode, made.body).toBe(200);
    const channelId = made.json().data.id as number;
    const stranded: string[] = [];
    for (let i = 0; i < 25; i++) {
      const g = `race${i}`;
      expect((await h.putOption(root, 'GroupRatio', { ...BASE, [g]: 0.5 })).statusCode).toBe(200);
      const delay = i % 4;
      const [drop, ...writes] = await Promise.all([
        new Promise((r) => setTimeout(r, delay)).then(() => h.putOption(root, 'GroupRatio', BASE)),
        inject('POST', '/api/user/manage', { id: setGroupTarget.user.id, action: 'set_group', group: g }),
        inject('PUT', '/api/user/', { id: editTarget.user.id, group: g }),
        inject('POST', '/api/user/', { username: uniqueName(), password: 'password-123', group: g }),
        inject('POST', '/api/channel/', { name: g, base_url: 'https://api.example.com', key: 'k', models: 'm', group: g }),
        inject('PUT', '/api/channel/', { id: channelId, group: ['default', g] }),
      ]);
      for (const res of [drop, ...writes]) expect([200, 400], res.body).toContain(res.statusCode);
      const ratio = JSON.parse((await h.storedOption('GroupRatio'))!) as Record<string, number>;
      const [accounts] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE "group" = ${g} AND deleted_at IS NULL`;
      const [channels] = await h.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM channels WHERE ${g} = ANY(string_to_array("group", ','))`;
      if (!(g in ratio) && (accounts!.n > 0 || channels!.n > 0)) {
        stranded.push(`${g}: ${accounts!.n} accounts, ${channels!.n} channels (drop ${drop.statusCode}, writes ${writes.map((w) => w.statusCode).join(' ')})`);
      }
      // One side won: the drop (every write refused) or at least one write (the drop refused).
      if (drop.statusCode === 200) {
        for (const w of writes) expect(w.json().message, g).toBe(`group: unknown group "${g}"`);
      } else {
        expect(writes.some((w) => w.statusCode === 200), g).toBe(true);
      }
      // Back to a state without the group, for the next round.
      await h.sql`UPDATE users SET "group" = 'default' WHERE "group" = ${g}`;
      await h.sql`DELETE FROM channels WHERE "group" = ${g}`;
      const reset = await inject('PUT', '/api/channel/', { id: channelId, group: ['default'] });
      expect(reset.statusCode, reset.body).toBe(200);
    }
    expect(stranded).toEqual([]);
  }, 120_000);
});
