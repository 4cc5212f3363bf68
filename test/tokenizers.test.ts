// Counting prompt tokens with each provider's own tokenizer, and whether a prompt fits a model.
// Pure unit tests: no database.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OPERATIONS, type Operation } from '../providers/operations/index.ts';
import { summarize } from '../providers/operations/summarize.ts';
import {
  checkPromptFits,
  contextWindow,
  countPromptTokens,
  countTextTokens,
  bytePairCount,
  DEFAULT_CONTEXT_WINDOW,
  ESTIMATE_MARGIN,
  openaiEncodingFor,
  TOKENS_PER_MESSAGE,
  TOKENS_PER_REPLY_PRIMING,
  type TokenizerKind,
} from '../providers/tokenizers.ts';

// The tokenizers load lazily, on the first count: they must need no network to do so.
beforeAll(() => {
  vi.stubGlobal('fetch', () => {
    throw new Error('the tokenizers must not use the network');
  });
});
afterAll(() => {
  vi.unstubAllGlobals();
});

const ops = [...OPERATIONS.values()] as Operation[];
const renderedFixtures = ops.flatMap((op) =>
  op.fixtures.map((f) => [`${op.name}/${f.name}`, op, op.prompt.render(f.input)] as const),
);

describe('known counts', () => {
  // Reference values: OpenAI's cookbook ("tiktoken is great!" is 6 cl100k_base tokens); the rest were
  // counted once with these packages and pinned, so an upgrade that changes them is noticed.
  it.each([
    ['hello world', 2, 2, 2],
    ['tiktoken is great!', 6, 6, 6],
    ['The quick brown fox jumps over the lazy dog.', 10, 10, 10],
    ['Hello, world! 👋 Grüße', 7, 8, 10],
    ['Grüße aus München! 👋 Сегодня хорошая погода. 今日はいい天気ですね。', 21, 33, 36],
  ])('%j: o200k_base %i, cl100k_base %i, Claude %i', (text, o200k, cl100k, claude) => {
    expect(countTextTokens('openai', 'gpt-4o', text)).toBe(o200k);
    expect(countTextTokens('openai', 'gpt-4.1-mini', text)).toBe(o200k);
    expect(countTextTokens('openai', 'gpt-4', text)).toBe(cl100k);
    expect(countTextTokens('sim', 'anything', text)).toBe(cl100k);
    expect(countTextTokens('anthropic', 'claude-sonnet-4-5', text)).toBe(claude);
  });

  it('counts special-token markers in a text as plain text instead of throwing', () => {
    const text = 'ignore this <|endoftext|> and this <|im_start|> marker';
    for (const [kind, model] of [['openai', 'gpt-4o'], ['openai', 'gpt-4'], ['sim', 'x'], ['anthropic', 'claude-opus-4-1']] as const) {
      expect(countTextTokens(kind, model, text)).toBeGreaterThan(10);
    }
    // As plain text, "<|endoftext|>" takes several tokens, not the one special token.
    expect(countTextTokens('openai', 'gpt-4', '<|endoftext|>')).toBeGreaterThan(1);
  });

  it('a prompt counts both messages, their overhead and the reply priming', () => {
    const p = { system: 'You answer in JSON.', user: 'hello world' };
    const bare = countTextTokens('openai', 'gpt-4o', p.system) + countTextTokens('openai', 'gpt-4o', p.user);
    expect(countPromptTokens('openai', 'gpt-4o', p)).toBe(bare + 2 * TOKENS_PER_MESSAGE + TOKENS_PER_REPLY_PRIMING);
    expect(countPromptTokens('openai', 'gpt-4o', { system: '', user: 'hello world' })).toBe(2 + TOKENS_PER_MESSAGE + TOKENS_PER_REPLY_PRIMING);
  });
});

describe('encodings and context windows', () => {
  it.each([
    ['gpt-4o', 'o200k_base'], ['gpt-4o-mini-2024-07-18', 'o200k_base'], ['chatgpt-4o-latest', 'o200k_base'],
    ['gpt-4.1', 'o200k_base'], ['gpt-4.1-nano', 'o200k_base'], ['gpt-5', 'o200k_base'], ['gpt-5-mini', 'o200k_base'],
    ['o1', 'o200k_base'], ['o3-mini', 'o200k_base'], ['o4-mini-2025-04-16', 'o200k_base'], ['openai/gpt-4o', 'o200k_base'],
    ['GPT-4o', 'o200k_base'], ['gpt-oss-120b', 'o200k_base'],
    ['gpt-4', 'cl100k_base'], ['gpt-4-turbo', 'cl100k_base'], ['gpt-3.5-turbo', 'cl100k_base'], ['gpt-35-turbo', 'cl100k_base'],
    ['llama-3.1-70b-instruct', 'cl100k_base'], ['my-azure-deployment', 'cl100k_base'], ['o10-custom', 'cl100k_base'],
  ])('%s uses %s', (model, encoding) => {
    expect(openaiEncodingFor(model)).toBe(encoding);
  });

  it.each([
    ['openai', 'gpt-4.1', 1_047_576], ['openai', 'gpt-4.1-mini-2025-04-14', 1_047_576],
    ['openai', 'gpt-4o', 128_000], ['openai', 'gpt-4o-mini', 128_000],
    ['openai', 'gpt-5', 400_000], ['openai', 'gpt-5-nano', 400_000], ['openai', 'gpt-5-chat-latest', 128_000],
    ['openai', 'o3', 200_000], ['openai', 'o4-mini', 200_000],
    ['anthropic', 'claude-sonnet-4-5', 200_000], ['anthropic', 'claude-3-5-haiku-latest', 200_000],
    ['anthropic', 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', 200_000],
    ['openai', 'gpt-4', DEFAULT_CONTEXT_WINDOW], ['openai', 'llama-3.1-70b', DEFAULT_CONTEXT_WINDOW],
    ['sim', 'sim', DEFAULT_CONTEXT_WINDOW],
  ] as const)('%s %s: %i tokens', (kind, model, tokens) => {
    expect(contextWindow(kind, model)).toBe(tokens);
  });

  it('a configured context window wins, and must be a positive integer', () => {
    expect(contextWindow('openai', 'llama-3.1-70b', 131_072)).toBe(131_072);
    expect(contextWindow('anthropic', 'claude-sonnet-4-5', 1_000_000)).toBe(1_000_000);
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => contextWindow('sim', 'x', bad)).toThrow(RangeError);
    }
  });
});

describe('fixtures fit the big models', () => {
  it.each(renderedFixtures)('%s fits gpt-4.1-mini and claude-sonnet-4-5 with room', (_, op, prompt) => {
    for (const [kind, model] of [['openai', 'gpt-4.1-mini'], ['anthropic', 'claude-sonnet-4-5'], ['openai', 'gpt-4o']] as const) {
      const fit = checkPromptFits(kind, model, prompt, op.prompt.maxOutputTokens);
      expect(fit.ok).toBe(true);
      // "With room": the whole request takes under a tenth of the window.
      expect(fit.promptTokens + op.prompt.maxOutputTokens).toBeLessThan(contextWindow(kind, model) / 10);
    }
  });

  it.each(renderedFixtures)('%s: plausible and stable counts', (_, _op, prompt) => {
    const chars = [...prompt.system].length + [...prompt.user].length;
    for (const kind of ['openai', 'anthropic', 'sim'] as const) {
      const model = kind === 'anthropic' ? 'claude-sonnet-4-5' : 'gpt-4.1-mini';
      const tokens = countPromptTokens(kind, model, prompt);
      // Between ~1.2 and ~6 characters a token (emoji and accented text take more tokens per character).
      expect(tokens).toBeGreaterThan(chars / 6);
      expect(tokens).toBeLessThan(chars / 1.2);
      expect(countPromptTokens(kind, model, prompt)).toBe(tokens);
    }
  });

  it('the model picks the encoding: o200k_base and cl100k_base count the non-English fixture differently', () => {
    const [, , prompt] = renderedFixtures.find(([name]) => name === 'summarize/unicode-emoji-french')!;
    const o200k = countPromptTokens('openai', 'gpt-4o', prompt);
    const cl100k = countPromptTokens('openai', 'gpt-4', prompt);
    expect(o200k).toBeLessThan(cl100k);
    expect(countPromptTokens('openai', 'gpt-5-mini', prompt)).toBe(o200k);
    expect(countPromptTokens('openai', 'gpt-3.5-turbo', prompt)).toBe(cl100k);
  });
});

describe('checkPromptFits', () => {
  // 20,000 characters of realistic prose: the summarize fixtures over and over.
  const longText = [...summarize.fixtures.map((f) => f.input.text).join('\n\n').repeat(10)].slice(0, 20_000).join('');
  const longPrompt = summarize.prompt.render({ text: longText });
  const maxOut = summarize.prompt.maxOutputTokens;

  it('a 20,000-character text is a valid input of a few thousand tokens', () => {
    expect([...longText].length).toBe(20_000);
    expect(summarize.input.safeParse({ text: longText }).success).toBe(true);
    const tokens = countPromptTokens('openai', 'gpt-4.1-mini', longPrompt);
    expect(tokens).toBeGreaterThan(4_000);
    expect(tokens).toBeLessThan(10_000);
  });

  it.each([
    ['openai', 'gpt-4.1-mini'], ['openai', 'gpt-4o'], ['openai', 'gpt-5-mini'], ['openai', 'o4-mini'],
    ['anthropic', 'claude-sonnet-4-5'], ['anthropic', 'claude-3-5-haiku-latest'],
  ] as const)('it fits %s %s', (kind, model) => {
    expect(checkPromptFits(kind, model, longPrompt, maxOut)).toEqual({ ok: true, promptTokens: expect.any(Number) });
  });

  it.each([
    ['openai', 'gpt-4'], ['openai', 'some-local-model'], ['sim', 'sim'], ['anthropic', 'claude-sonnet-4-5', 8_192],
  ] as const)('it does not fit an 8k context: %s %s', (kind, model, configured?: number) => {
    const fit = checkPromptFits(kind, model, longPrompt, maxOut, configured);
    expect(fit.ok).toBe(false);
    if (fit.ok) return;
    expect(fit.promptTokens).toBe(countPromptTokens(kind, model, longPrompt));
    expect(fit.reason).toContain(`context window of 8192`);
    expect(fit.reason).toContain(`the output may take ${maxOut}`);
  });

  it('a configured window makes it fit; the output budget counts', () => {
    expect(checkPromptFits('openai', 'some-local-model', longPrompt, maxOut, 32_768).ok).toBe(true);
    const tokens = countPromptTokens('openai', 'gpt-4', longPrompt);
    expect(checkPromptFits('openai', 'gpt-4', longPrompt, 1, tokens + 1).ok).toBe(true);
    expect(checkPromptFits('openai', 'gpt-4', longPrompt, 2, tokens + 1).ok).toBe(false);
  });

  it('Claude counts carry a safety margin, since the tokenizer is only approximate for Claude 3+', () => {
    const tokens = countPromptTokens('anthropic', 'claude-sonnet-4-5', longPrompt);
    const budgeted = Math.ceil(tokens * ESTIMATE_MARGIN.anthropic);
    expect(budgeted).toBeGreaterThan(tokens);
    expect(checkPromptFits('anthropic', 'claude-sonnet-4-5', longPrompt, 100, budgeted + 100).ok).toBe(true);
    const fit = checkPromptFits('anthropic', 'claude-sonnet-4-5', longPrompt, 100, budgeted + 99);
    expect(fit.ok).toBe(false);
    if (!fit.ok) expect(fit.reason).toContain(`${tokens} (${budgeted} with the estimate's margin)`);
  });

  it('refuses a nonsensical output budget', () => {
    for (const bad of [0, -5, 1.5]) expect(() => checkPromptFits('sim' as TokenizerKind, 'x', longPrompt, bad)).toThrow(RangeError);
  });
});

describe('long pre-tokens (no spaces) are counted exactly and fast', () => {
  // js-tiktoken's merge is quadratic with a large constant: 20,000 characters of Thai (one pre-token)
  // took it ~8.5 minutes, 20,000 "y" ~30 s. Counts below were taken once from js-tiktoken itself.
  const thai = 'กรุงเทพมหานครประกาศปรับค่าโดยสารรถประจำทางตั้งแต่เดือนเมษายนปีหน้าเนื่องจากต้นทุนเชื้อเพลิงและค่าแรงที่สูงขึ้น';
  const fill = (s: string) => s.repeat(Math.ceil(20_000 / s.length)).slice(0, 20_000);
  const letters = Array.from({ length: 20_000 }, (_, i) => String.fromCharCode(97 + ((i * 7919) % 26))).join('');

  it.each([
    ['20,000 × "y"', fill('y'), 5_000, 5_000],
    ['20,000 pseudo-random letters', letters, 11_538, 10_769],
    ['20,000 characters of Thai', fill(thai), 6_910, 19_091],
  ])('%s: o200k_base %i, cl100k_base %i, each in well under a second', (_, text, o200k, cl100k) => {
    const started = performance.now();
    expect(countTextTokens('openai', 'gpt-4o', text)).toBe(o200k);
    expect(countTextTokens('openai', 'gpt-4', text)).toBe(cl100k);
    countTextTokens('anthropic', 'claude-sonnet-4-5', text);
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it('emoji, whitespace and Japanese runs stay fast too', () => {
    const ja = '東京都は十二日、来年四月から都営バスの運賃を見直すと発表した。大人の運賃は現在の二百十円から二百三十円に引き上げられた。';
    for (const text of [fill('😀'), fill(' '), fill(ja), fill('👩‍👧‍👦')]) {
      const started = performance.now();
      for (const [kind, model] of [['openai', 'gpt-4o'], ['openai', 'gpt-4'], ['anthropic', 'claude-opus-4-1']] as const) {
        expect(countTextTokens(kind, model, text)).toBeGreaterThan(0);
      }
      expect(performance.now() - started).toBeLessThan(3_000);
    }
    expect(countTextTokens('openai', 'gpt-4o', fill('😀'))).toBe(10_000);
  });

  it('bytePairCount merges exactly as js-tiktoken does', async () => {
    const { Tiktoken } = await import('js-tiktoken/lite');
    const { default: o200k } = await import('js-tiktoken/ranks/o200k_base');
    const encoder = new Tiktoken(o200k);
    const rankMap = (encoder as unknown as { rankMap: Map<string, number> }).rankMap;
    const pattern = new RegExp(o200k.pat_str, 'gu');
    const alphabets = ['abcdefghijklmnopqrstuvwxyz', 'กรุงเทพมหานครประกาศปรับค่า', 'ÄÖÜäöüßéèêàç', '😀👍🎉💚', 'aaaab', '!?#%&*', '東京都は十二日来年'];
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    let compared = 0;
    for (let t = 0; t < 1_500; t++) {
      const alphabet = [...alphabets[t % alphabets.length]!];
      const text = Array.from({ length: 2 + Math.floor(random() * 40) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
      const pieces = [...text.matchAll(pattern)];
      if (pieces.length !== 1 || pieces[0]![0] !== text) continue; // compare single pre-tokens only
      compared++;
      expect(bytePairCount(new TextEncoder().encode(text), (k) => rankMap.get(k)), text).toBe(encoder.encode(text, [], []).length);
    }
    expect(compared).toBeGreaterThan(800);
    // And whole texts: the split into runs and long pre-tokens changes no count.
    const texts = [
      ...ops.flatMap((op) => op.fixtures.map((f) => op.prompt.render(f.input).user)),
      'Donaudampfschifffahrtsgesellschaftskapitän, internationalization, https://example.com/a/very/long/path?with=query&and=more',
      '  leading spaces,   inner   runs,\ttabs\n\n\nand newlines  ',
      'กรุงเทพมหานครประกาศปรับค่าโดยสาร 東京都は十二日、来年四月から 😀😀😀👩‍👧‍👦 ....!!!!????',
    ];
    for (const text of texts) expect(countTextTokens('openai', 'gpt-4o', text)).toBe(encoder.encode(text, [], []).length);
  });
});
