import { describe, expect, it } from 'vitest';
import { withMemberSet, withoutTopLevelMember, withTopLevelMember } from './json-member.js';

const cut = (text: string): string | null => withoutTopLevelMember(Buffer.from(text), 'diagnostics')?.toString() ?? null;

describe('withoutTopLevelMember', () => {
  it('takes the member out wherever it stands, the rest byte for byte', () => {
    expect(cut('{"a":1,"diagnostics":{"previous_message_id":"msg_1"},"b":[1.10,9007199254740993]}')).toBe('{"a":1,"b":[1.10,9007199254740993]}');
    expect(cut('{"diagnostics":null,"a":"x"}')).toBe('{"a":"x"}');
    expect(cut('{"a":"x", "diagnostics" : {"k":"}\\"{"} }')).toBe('{"a":"x" }');
    expect(cut('{"diagnostics":{}}')).toBe('{}');
    expect(cut(' {\n  "a": {"diagnostics": 1},\n  "diagn\\u006fstics": [ {"x": "]"} ],\n  "z": true\n}')).toBe(' {\n  "a": {"diagnostics": 1},\n  "z": true\n}');
  });

  it('is null when the object names none, or is no object', () => {
    expect(cut('{"a":{"diagnostics":1}}')).toBeNull();
    expect(cut('{}')).toBeNull();
    expect(cut('[{"diagnostics":1}]')).toBeNull();
  });

  it('leaves valid JSON that parses to the object without the member', () => {
    const body = { model: 'm', diagnostics: { previous_message_id: 'msg' }, messages: [{ role: 'user', content: 'a "quoted" } text' }], max_tokens: 5 };
    const out = cut(JSON.stringify(body));
    const { diagnostics: _, ...rest } = body;
    expect(JSON.parse(out!)).toEqual(rest);
  });
});

describe('withTopLevelMember', () => {
  const set = (text: string, name: string, json: string): string | null => withTopLevelMember(Buffer.from(text), name, json)?.toString() ?? null;
  it('writes the member\'s new value in place of its old one, the rest byte for byte', () => {
    expect(set('{"model":"a","x":[1.10,12345678901234567890]}', 'model', '"b"')).toBe('{"model":"b","x":[1.10,12345678901234567890]}');
    expect(set(' { "x" : 1 , "tools" : [ {"a":"]"} ] }', 'tools', '[]')).toBe(' { "x" : 1 , "tools" : [] }');
    expect(set('{"a":{"model":1},"mod\\u0065l":"a"}', 'model', '"z"')).toBe('{"a":{"model":1},"mod\\u0065l":"z"}');
  });

  it('is null when the object names none at its top level, or is no object', () => {
    expect(set('{"a":{"model":1}}', 'model', '1')).toBeNull();
    expect(set('[]', 'model', '1')).toBeNull();
  });
});

describe('withMemberSet', () => {
  it('replaces a member where it is, or adds it first, the rest byte for byte', () => {
    expect(withMemberSet(Buffer.from('{"a":1,"n":9007199254740993}'), 'a', '2')!.toString()).toBe('{"a":2,"n":9007199254740993}');
    expect(withMemberSet(Buffer.from(' {"n":9007199254740993}'), 'a', '{"x":true}')!.toString()).toBe(' {"a":{"x":true},"n":9007199254740993}');
    expect(withMemberSet(Buffer.from('{ }'), 'a', '1')!.toString()).toBe('{"a":1 }');
    expect(JSON.parse(withMemberSet(Buffer.from('{ }'), 'a', '1')!.toString())).toEqual({ a: 1 });
    expect(withMemberSet(Buffer.from('[1]'), 'a', '1')).toBeNull();
  });
});
