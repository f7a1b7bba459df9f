import { describe, expect, it } from 'vitest';
import { allowedModels, listModels, modelInfo, parseListModelsQuery, retrieveModel, type ListModelsQuery } from './models-list.js';

const IDS = ['claude-haiku-4-5-20251001', 'claude-opus-4-7', 'claude-sonnet-4-5-20250929', 'my-local-model', 'claude-sonnet-4-6', 'vendor-x-20240115'];
const q = (over: Partial<ListModelsQuery> = {}): ListModelsQuery => ({ limit: 20, afterId: null, beforeId: null, ...over });
const NEWEST_FIRST = ['claude-opus-4-7', 'claude-sonnet-4-6', 'claude-haiku-4-5-20251001', 'claude-sonnet-4-5-20250929', 'vendor-x-20240115', 'my-local-model'];

describe('models list', () => {
  it("lists the models newest first in Anthropic's shape", () => {
    const page = listModels(IDS, q());
    expect(page.data.map((m) => m.id)).toEqual(NEWEST_FIRST);
    expect(page.data[0]).toEqual({ type: 'model', id: 'claude-opus-4-7', display_name: 'Claude Opus 4.7', created_at: '2026-04-16T00:00:00Z' });
    expect(page).toMatchObject({ has_more: false, first_id: 'claude-opus-4-7', last_id: 'my-local-model' });
    expect(modelInfo('vendor-x-20240115')).toEqual({ type: 'model', id: 'vendor-x-20240115', display_name: 'vendor-x-20240115', created_at: '2024-01-15T00:00:00Z' });
    expect(listModels([], q())).toEqual({ data: [], has_more: false, first_id: null, last_id: null });
  });

  it('names and dates the Claude models since Opus 4.6 as Anthropic announced them', () => {
    const known: Array<[string, string, string]> = [
      ['claude-opus-4-6', 'Claude Opus 4.6', '2026-02-05'], ['claude-sonnet-4-6', 'Claude Sonnet 4.6', '2026-02-17'],
      ['claude-opus-4-7', 'Claude Opus 4.7', '2026-04-16'], ['claude-opus-4-8', 'Claude Opus 4.8', '2026-05-28'],
      ['claude-fable-5', 'Claude Fable 5', '2026-06-09'], ['claude-mythos-5', 'Claude Mythos 5', '2026-06-09'],
      ['claude-sonnet-5', 'Claude Sonnet 5', '2026-06-30'], ['claude-opus-5', 'Claude Opus 5', '2026-07-24'],
      ['claude-fable-5-1', 'Claude Fable 5.1', '2026-09-01'], ['claude-mythos-5-1', 'Claude Mythos 5.1', '2026-09-01'],
      ['claude-opus-5-5', 'Claude Opus 5.5', '2026-09-22'], ['claude-sonnet-5-5', 'Claude Sonnet 5.5', '2026-09-28'],
      ['claude-haiku-5-5', 'Claude Haiku 5.5', '2026-10-07'],
    ];
    for (const [id, name, date] of known) expect(modelInfo(id)).toEqual({ type: 'model', id, display_name: name, created_at: `${date}T00:00:00Z` });
    expect(listModels(known.map((k) => k[0]), q({ limit: 3 })).data.map((m) => m.id)).toEqual(['claude-haiku-5-5', 'claude-sonnet-5-5', 'claude-opus-5-5']);
  });

  it("names and dates Anthropic's aliases as the snapshots they point at; an unknown undated id keeps its id and the epoch", () => {
    expect(modelInfo('claude-haiku-4-5')).toEqual({ type: 'model', id: 'claude-haiku-4-5', display_name: 'Claude Haiku 4.5', created_at: '2025-10-01T00:00:00Z' });
    expect(modelInfo('claude-opus-4-0')).toEqual({ type: 'model', id: 'claude-opus-4-0', display_name: 'Claude Opus 4', created_at: '2025-05-22T00:00:00Z' });
    expect(modelInfo('claude-3-5-haiku-latest').display_name).toBe('Claude Haiku 3.5');
    expect(modelInfo('my-local-model')).toEqual({ type: 'model', id: 'my-local-model', display_name: 'my-local-model', created_at: '1970-01-01T00:00:00Z' });
    // A model id that names an Object.prototype member is an unknown model (toString had created_at undefined).
    for (const id of ['__proto__', 'toString', 'constructor', 'hasOwnProperty']) {
      expect(modelInfo(id)).toEqual({ type: 'model', id, display_name: id, created_at: '1970-01-01T00:00:00Z' });
    }
  });

  it('pages forward with limit and after_id, and backward with before_id', () => {
    const first = listModels(IDS, q({ limit: 2 }));
    expect(first.data.map((m) => m.id)).toEqual(NEWEST_FIRST.slice(0, 2));
    expect(first.has_more).toBe(true);
    const second = listModels(IDS, q({ limit: 2, afterId: first.last_id }));
    expect(second.data.map((m) => m.id)).toEqual(NEWEST_FIRST.slice(2, 4));
    expect(second.has_more).toBe(true);
    const third = listModels(IDS, q({ limit: 2, afterId: second.last_id }));
    expect(third.data.map((m) => m.id)).toEqual(NEWEST_FIRST.slice(4, 6));
    expect(third.has_more).toBe(false);
    const back = listModels(IDS, q({ limit: 2, beforeId: third.first_id }));
    expect(back.data.map((m) => m.id)).toEqual(NEWEST_FIRST.slice(2, 4));
    expect(back.has_more).toBe(true);
    const start = listModels(IDS, q({ limit: 3, beforeId: NEWEST_FIRST[2]! }));
    expect(start.data.map((m) => m.id)).toEqual(NEWEST_FIRST.slice(0, 2));
    expect(start.has_more).toBe(false);
    expect(listModels(IDS, q({ afterId: 'gone' })).data).toEqual([]);
  });

  it('parses and checks the query like Anthropic', () => {
    const get = (o: Record<string, string>) => (n: string) => o[n];
    expect(parseListModelsQuery(get({}))).toEqual(q());
    expect(parseListModelsQuery(get({ limit: '5', after_id: 'a' }))).toEqual(q({ limit: 5, afterId: 'a' }));
    expect(parseListModelsQuery(get({ limit: '0' }))).toMatch(/between 1 and 1000/);
    expect(parseListModelsQuery(get({ limit: '1001' }))).toMatch(/between 1 and 1000/);
    expect(parseListModelsQuery(get({ limit: '-1' }))).toMatch(/between 1 and 1000/);
    expect(parseListModelsQuery(get({ limit: 'ten' }))).toMatch(/integer/);
    expect(parseListModelsQuery(get({ after_id: 'a', before_id: 'b' }))).toMatch(/both/);
  });

  it('a key sees the models of its group, narrowed to its whitelist when enabled', () => {
    const served = new Set(['claude-opus-4-7', 'claude-sonnet-4-6', 'claude-haiku-4-5-20251001']);
    expect([...allowedModels(served, null)].sort()).toEqual([...served].sort());
    const allowed = allowedModels(served, new Set(['claude-sonnet-4-6', 'not-served']));
    expect([...allowed]).toEqual(['claude-sonnet-4-6']);
    expect(retrieveModel(allowed, 'claude-sonnet-4-6')?.display_name).toBe('Claude Sonnet 4.6');
    expect(retrieveModel(allowed, 'claude-opus-4-7')).toBeNull();
  });
});
