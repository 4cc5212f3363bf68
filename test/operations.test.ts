// The built-in operations as contracts: fixtures, prompts, output checks, and the output JSON Schema.
// Pure unit tests: no database.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { classify } from '../providers/operations/classify.ts';
import { defineOperation } from '../providers/operations/define.ts';
import { OPERATIONS, checkInput, checkOutput, type Operation } from '../providers/operations/index.ts';
import { strictJsonSchema } from '../providers/operations/jsonSchema.ts';
import { summarize } from '../providers/operations/summarize.ts';

const ops = [...OPERATIONS.values()];
const codePoints = (s: string) => [...s].length;

describe('fixtures', () => {
  it.each(ops.map((op) => [op.name, op] as const))('%s has at least six named, distinct fixtures', (_, op) => {
    expect(op.fixtures.length).toBeGreaterThanOrEqual(6);
    const names = op.fixtures.map((f) => f.name);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
    const texts = op.fixtures.map((f) => JSON.stringify(f.input));
    expect(new Set(texts).size).toBe(texts.length);
  });

  const all = ops.flatMap((op) => op.fixtures.map((f) => [`${op.name}/${f.name}`, op, f.input] as const));
  it.each(all)('%s satisfies the input schema', (_, op, input) => {
    expect(op.input.safeParse(input).success).toBe(true);
    expect(checkInput(op, input)).toEqual({ ok: true });
  });

  it('summarize covers short, long, multi-line and non-Latin/emoji texts', () => {
    const texts = summarize.fixtures.map((f) => f.input.text);
    expect(Math.min(...texts.map(codePoints))).toBeLessThan(300);
    expect(Math.max(...texts.map(codePoints))).toBeGreaterThan(1_500);
    expect(texts.some((t) => /\p{Extended_Pictographic}/u.test(t) && /\u200d/.test(t))).toBe(true);
    expect(texts.filter((t) => t.split('\n').length > 10).length).toBeGreaterThanOrEqual(3);
    // No placeholder text.
    for (const t of texts) expect(t).not.toMatch(/lorem|ipsum|TODO|placeholder/i);
  });

  it('classify covers 2, 5 and many labels, and labels with spaces and punctuation', () => {
    const counts = classify.fixtures.map((f) => f.input.labels.length);
    expect(counts).toContain(2);
    expect(counts).toContain(5);
    expect(Math.max(...counts)).toBeGreaterThanOrEqual(25);
    const labels = classify.fixtures.flatMap((f) => f.input.labels);
    expect(labels.some((l) => / /.test(l) && /[:;/&"'(),…—?]/.test(l))).toBe(true);
    for (const f of classify.fixtures) expect(f.input.text).not.toMatch(/lorem|ipsum/i);
  });

  it('the fixtures are checked: a broken input is refused by the same schema', () => {
    expect(checkInput(summarize, { text: '' }).ok).toBe(false);
    expect(checkInput(summarize, { text: 'x'.repeat(20_001) }).ok).toBe(false);
    expect(checkInput(classify, { text: 'x', labels: ['a', 'a'] }).ok).toBe(false);
    expect(checkInput(classify, { text: 'x', labels: ['a'] }).ok).toBe(false);
    expect(checkInput(classify, { text: 'x', labels: ['a', 'b'], extra: 1 }).ok).toBe(false);
  });
});

describe('prompts', () => {
  const all = ops.flatMap((op) => op.fixtures.map((f) => [`${op.name}/${f.name}`, op, f.input] as const));
  it.each(all)('%s renders: system states the contract, user carries the input verbatim', (_, op, input) => {
    const p = (op as Operation).prompt.render(input);
    expect(p.system.length).toBeGreaterThan(200);
    const text = (input as { text: string }).text;
    expect(p.user).toContain(`<text>\n${text}\n</text>`);
    expect(p.system).toMatch(/exactly one JSON object/);
    expect(p.system).toMatch(/no other keys/);
  });

  it('the system prompts do not depend on the input (a cacheable prefix)', () => {
    for (const op of ops as Operation[]) {
      const systems = new Set(op.fixtures.map((f) => op.prompt.render(f.input).system));
      expect(systems.size).toBe(1);
    }
  });

  it('summarize states the JSON shape, the limits and the business rule with the text’s own length', () => {
    const { system, user } = summarize.prompt.render({ text: 'Ünïcødé 👩‍👧‍👦 text.' });
    expect(system).toContain('{"summary": string, "keyPoints": [string, ...]}');
    expect(system).toMatch(/1 to 2000 characters/);
    expect(system).toMatch(/1 to 10 strings, each 1 to 300 characters/);
    expect(system).toMatch(/MUST be shorter than the text/);
    // Code points, as the business rule counts: 7 + 1 + 5 (the family emoji) + 1 + 5.
    expect(user).toMatch(/^The text below is 19 characters long, so the summary must have at most 18 characters\./);
    expect(summarize.prompt.render({ text: 'x'.repeat(20_000) }).user).toMatch(/at most 2000 characters/);
  });

  it('classify states the JSON shape, the confidence range and that the label is verbatim from the list', () => {
    const labels = ['Bug: crash / data loss', 'Question — "how do I…?"'];
    const { system, user } = classify.prompt.render({ text: 'It crashed.', labels });
    expect(system).toContain('{"label": string, "confidence": number}');
    expect(system).toMatch(/MUST be one of the given labels, copied verbatim/);
    expect(system).toMatch(/from 0 to 1/);
    expect(user).toContain(JSON.stringify(labels));
    expect(JSON.parse(user.split('\n')[1]!)).toEqual(labels);
  });

  it('a template change comes with a version bump (pinned renderings per version)', () => {
    // If this fails because you changed a template: bump prompt.version and pin the new rendering.
    const pinned: Record<string, string> = {
      'summarize-v2': '73213f3215669db34cb63202e7727e7fb6535848bc03b86d3680ac8da5cf8f24',
      'classify-v2': '52f046b6cf827aea01871ba9e3061ce22acea4f23988ede6986ac7923c249074',
    };
    const probe: Record<string, unknown> = {
      summarize: { text: 'A probe text.' },
      classify: { text: 'A probe text.', labels: ['a', 'b c'] },
    };
    for (const op of ops as Operation[]) {
      const rendered = op.prompt.render(probe[op.name]);
      const hash = createHash('sha256').update(JSON.stringify([rendered.system, rendered.user, op.prompt.maxOutputTokens])).digest('hex');
      expect({ version: op.prompt.version, hash }).toEqual({ version: op.prompt.version, hash: pinned[op.prompt.version] });
    }
  });
});

describe('checkOutput', () => {
  const text = summarize.fixtures[0]!.input.text;
  const sInput = { text };
  const valid = { summary: 'The council will close Harbour Street to cars from 1 June.', keyPoints: ['Vote 7–2.', 'Works cost £2.3m.'] };
  const cInput = classify.fixtures.find((f) => f.name === 'labels-with-spaces-and-punctuation')!.input;

  it('accepts valid outputs', () => {
    expect(checkOutput(summarize, sInput, valid)).toEqual({ ok: true, output: valid });
    expect(checkOutput(summarize, sInput, { summary: 'x', keyPoints: Array(10).fill('y'.repeat(300)) }).ok).toBe(true);
    expect(checkOutput(classify, cInput, { label: 'Bug: crash / data loss', confidence: 0.93 }).ok).toBe(true);
    expect(checkOutput(classify, cInput, { label: "Won't fix; works as intended", confidence: 0 }).ok).toBe(true);
    expect(checkOutput(classify, cInput, { label: 'Question — "how do I…?"', confidence: 1 }).ok).toBe(true);
  });

  it.each([
    ['an extra top-level key', { ...valid, title: 'x' }, /title|unrecognized/i],
    ['a missing key', { summary: valid.summary }, /keyPoints/],
    ['an empty summary', { ...valid, summary: '' }, /summary/],
    ['a summary over 2000 characters', { ...valid, summary: 'x'.repeat(2_001) }, /summary/],
    ['no key points', { ...valid, keyPoints: [] }, /keyPoints/],
    ['eleven key points', { ...valid, keyPoints: Array(11).fill('a point') }, /keyPoints/],
    ['an empty key point', { ...valid, keyPoints: [''] }, /keyPoints\.0/],
    ['a key point over 300 characters', { ...valid, keyPoints: ['x'.repeat(301)] }, /keyPoints\.0/],
    ['a string instead of an object', JSON.stringify(valid), /top level/],
  ])('summarize refuses %s', (_, output, reason) => {
    const check = checkOutput(summarize, sInput, output);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.reason).toMatch(reason);
  });

  it('summarize refuses a summary that is not shorter than the text, counted in code points', () => {
    const short = { text: 'Rain today. Sun tomorrow.' };
    for (const summary of [short.text, `${short.text}!`]) {
      const check = checkOutput(summarize, short, { summary, keyPoints: ['rain'] });
      expect(check).toEqual({ ok: false, reason: 'output breaks the summarize business rule: the summary is not shorter than the text' });
    }
    expect(checkOutput(summarize, short, { summary: 'Rain, then sun.', keyPoints: ['rain'] }).ok).toBe(true);
    // 👩‍👧‍👦 is 5 code points but 8 UTF-16 units: 5 code points are not shorter than 5.
    const emoji = { text: '👩‍👧‍👦' };
    expect(checkOutput(summarize, emoji, { summary: 'abcde', keyPoints: ['x'] }).ok).toBe(false);
    expect(checkOutput(summarize, emoji, { summary: 'abcd', keyPoints: ['x'] }).ok).toBe(true);
  });

  it.each([
    ['an extra top-level key', { label: 'Bug: crash / data loss', confidence: 0.9, reason: 'x' }, /unrecognized|reason/i],
    ['a missing key', { label: 'Bug: crash / data loss' }, /confidence/],
    ['a confidence below 0', { label: 'Bug: crash / data loss', confidence: -0.01 }, /confidence/],
    ['a confidence above 1', { label: 'Bug: crash / data loss', confidence: 1.01 }, /confidence/],
    ['a confidence as a string', { label: 'Bug: crash / data loss', confidence: '0.9' }, /confidence/],
    ['a label not among the labels', { label: 'security', confidence: 0.9 }, /"security" is not one of the input's labels/],
    ['a label in another case', { label: 'bug: crash / data loss', confidence: 0.9 }, /not one of the input's labels/],
    ['a label without its punctuation', { label: 'Bug crash data loss', confidence: 0.9 }, /not one of the input's labels/],
    ['a label with extra spaces', { label: ' Bug: crash / data loss', confidence: 0.9 }, /not one of the input's labels/],
  ])('classify refuses %s', (_, output, reason) => {
    const check = checkOutput(classify, cInput, output);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.reason).toMatch(reason);
  });
});

describe('outputJsonSchema and outputSchemaHash', () => {
  function objectsIn(node: unknown): Record<string, unknown>[] {
    if (Array.isArray(node)) return node.flatMap(objectsIn);
    if (!node || typeof node !== 'object') return [];
    const o = node as Record<string, unknown>;
    return [...(o.type === 'object' ? [o] : []), ...Object.values(o).flatMap(objectsIn)];
  }

  it.each(ops.map((op) => [op.name, op] as const))('%s: strict objects, all properties required, no $schema', (_, op) => {
    const schema = op.outputJsonSchema();
    expect(schema.type).toBe('object');
    expect(schema).not.toHaveProperty('$schema');
    const objects = objectsIn(schema);
    expect(objects.length).toBeGreaterThan(0);
    for (const o of objects) {
      expect(o.additionalProperties).toBe(false);
      expect([...(o.required as string[])].sort()).toEqual(Object.keys(o.properties as object).sort());
    }
  });

  it('says the contract exactly', () => {
    expect(summarize.outputJsonSchema()).toEqual({
      type: 'object',
      properties: {
        summary: { type: 'string', minLength: 1, maxLength: 2000 },
        keyPoints: { type: 'array', minItems: 1, maxItems: 10, items: { type: 'string', minLength: 1, maxLength: 300 } },
      },
      required: ['summary', 'keyPoints'],
      additionalProperties: false,
    });
    expect(classify.outputJsonSchema()).toEqual({
      type: 'object',
      properties: { label: { type: 'string' }, confidence: { type: 'number', minimum: 0, maximum: 1 } },
      required: ['label', 'confidence'],
      additionalProperties: false,
    });
  });

  it('hands out a copy: changing it changes neither later copies nor the hash', () => {
    const hash = summarize.outputSchemaHash();
    const copy = summarize.outputJsonSchema();
    (copy.properties as Record<string, unknown>).extra = { type: 'string' };
    copy.additionalProperties = true;
    expect(summarize.outputJsonSchema()).not.toHaveProperty('properties.extra');
    expect(summarize.outputJsonSchema().additionalProperties).toBe(false);
    expect(summarize.outputSchemaHash()).toBe(hash);
  });

  it('the hash is sha256 hex, stable across calls, and pinned', () => {
    for (const op of ops) {
      expect(op.outputSchemaHash()).toMatch(/^[0-9a-f]{64}$/);
      expect(op.outputSchemaHash()).toBe(op.outputSchemaHash());
    }
    // Pinned: a change here invalidates every certification, so it must be deliberate.
    expect(summarize.outputSchemaHash()).toBe('6c5220c20bd47884a51c9e28ed351652fd06a2314daab7ce8f33e2673726c27b');
    expect(classify.outputSchemaHash()).toBe('c29024d4e55990dea16526da90c45626a4a4f044fecabc85ed6bd7438d177a7e');
  });

  it('the hash changes when the schema changes, and only then', () => {
    expect(summarize.outputSchemaHash()).not.toBe(classify.outputSchemaHash());
    const variant = (output: z.ZodType) => defineOperation({ ...classify, name: 'variant', output }).outputSchemaHash();
    // The same schema written again, and with its bounds in another order: the same canonical JSON.
    expect(variant(z.strictObject({ label: z.string(), confidence: z.number().max(1).min(0) }))).toBe(classify.outputSchemaHash());
    // Properties in another order are another schema: `required` is an array, and a structured-output
    // model writes the keys in the schema's order.
    expect(variant(z.strictObject({ confidence: z.number().min(0).max(1), label: z.string() }))).not.toBe(classify.outputSchemaHash());
    expect(variant(z.strictObject({ label: z.string(), confidence: z.number().min(0).max(0.99) }))).not.toBe(classify.outputSchemaHash());
    expect(variant(z.strictObject({ label: z.string().min(1), confidence: z.number().min(0).max(1) }))).not.toBe(classify.outputSchemaHash());
  });

  it('refuses to define an operation whose output is not strict', () => {
    expect(() => strictJsonSchema(z.object({ a: z.string() }))).toThrow(/not strict/);
    expect(() => strictJsonSchema(z.strictObject({ a: z.string().optional() }))).toThrow(/a are not required/);
    expect(() => strictJsonSchema(z.strictObject({ a: z.string().default('x') }))).toThrow(/not required/);
    expect(() => strictJsonSchema(z.strictObject({ a: z.array(z.object({ b: z.string() })) }))).toThrow(/a\.items: object is not strict/);
    expect(() => strictJsonSchema(z.strictObject({ at: z.date() }))).toThrow();
    expect(() => defineOperation({ ...classify, name: 'loose', output: z.object({ label: z.string() }) })).toThrow(/loose output/);
  });
});
