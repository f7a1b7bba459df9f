import { describe, expect, it } from 'vitest';
import { parseInvalidation } from './invalidation.js';

describe('invalidation message', () => {
  it('reads what the console publishes and what is published by hand with just kind and id', () => {
    expect(parseInvalidation('{"kind":"token","id":3,"user_id":1}')).toEqual({ kind: 'token', id: 3, user_id: 1 });
    expect(parseInvalidation('{"kind":"token","id":3}')).toEqual({ kind: 'token', id: 3 });
    expect(parseInvalidation('{"kind":"user","id":1}')).toEqual({ kind: 'user', id: 1 });
    expect(parseInvalidation('{"kind":"channel"}')).toEqual({ kind: 'channel' });
    expect(parseInvalidation('{"kind":"options","keys":["ModelRatio"]}')).toEqual({ kind: 'options', keys: ['ModelRatio'] });
    expect(parseInvalidation('{"kind":"channel_aside","id":4,"ms":30000}')).toEqual({ kind: 'channel_aside', id: 4, ms: 30000 });
  });

  it('refuses what is not JSON, an unknown kind, or a user or key without a numeric id', () => {
    for (const raw of ['not json', '{"kind":"nonsense"}', '{"kind":"user"}', '{"kind":"token","id":"3"}', '[]', 'null',
      // A relay's setting aside needs a channel and a time of at most a day.
      '{"kind":"channel_aside","id":4}', '{"kind":"channel_aside","id":4,"ms":-1}', '{"kind":"channel_aside","id":4,"ms":1e12}', '{"kind":"channel_aside","id":0,"ms":1000}']) {
      expect(parseInvalidation(raw)).toBeUndefined();
    }
  });
});
