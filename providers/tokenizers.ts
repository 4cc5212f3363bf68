// Counts a rendered prompt's tokens with the provider's own tokenizer, and checks that the prompt plus the
// operation's output budget fits the model's context window. Everything here is offline: both packages
// ship their vocabularies (js-tiktoken as JS modules, @anthropic-ai/tokenizer as JSON + a WASM file).
//
// Importing this module is cheap: the tokenizer packages are loaded on first use, synchronously through
// require (both ship CommonJS builds), and each encoder is built once per process and cached. Building
// one is what costs: ~0.6–0.8 s and tens of MB for o200k_base / cl100k_base, ~0.2–0.5 s for the Claude
// tokenizer (a WASM build of tiktoken, compiled synchronously on first use). Counting is then fast and
// bounded: 20,000 characters of any kind take well under 0.2 s (see countPieces).
import { createRequire } from 'node:module';
import type { Prompt } from './adapters/types.ts';

export type TokenizerKind = 'openai' | 'anthropic' | 'sim';
export type OpenAIEncoding = 'o200k_base' | 'cl100k_base';

/**
 * Chat formats wrap each message in a few tokens (role, separators), and the reply is primed with a few
 * more; these are OpenAI's published figures for its chat models, used for all kinds as an estimate.
 */
export const TOKENS_PER_MESSAGE = 3;
export const TOKENS_PER_REPLY_PRIMING = 3;

/**
 * How much the count is inflated before it is compared with the context window. @anthropic-ai/tokenizer is
 * the pre-Claude-3 tokenizer: Anthropic publishes no tokenizer for Claude 3 and later and calls this one
 * "a very rough approximation" for them, so Claude prompts get a generous safety margin.
 */
export const ESTIMATE_MARGIN: Readonly<Record<TokenizerKind, number>> = { openai: 1, sim: 1, anthropic: 1.35 };

/** Context windows (input + output tokens) by model name; the first match wins. */
export const CONTEXT_WINDOWS: ReadonlyArray<{ pattern: RegExp; tokens: number }> = [
  { pattern: /^gpt-4\.1/, tokens: 1_047_576 },
  { pattern: /^(gpt-4o|chatgpt-4o)/, tokens: 128_000 },
  { pattern: /^gpt-5-chat/, tokens: 128_000 },
  { pattern: /^gpt-5/, tokens: 400_000 },
  { pattern: /^o[34](?![0-9])/, tokens: 200_000 },
  { pattern: /^claude-/, tokens: 200_000 },
];
/** For any other model, unless its context window is configured: small enough to be safe anywhere. */
export const DEFAULT_CONTEXT_WINDOW = 8_192;

/**
 * The model name as the tables match it: lower case, without a routing prefix ("openai/gpt-4o") or a
 * Bedrock-style vendor prefix ("us.anthropic.claude-…").
 */
function normalizeModel(model: string): string {
  const name = model.trim().toLowerCase();
  const base = name.slice(name.lastIndexOf('/') + 1);
  const claude = base.indexOf('claude-');
  return claude > 0 && base[claude - 1] === '.' ? base.slice(claude) : base;
}

/**
 * The tiktoken encoding of an OpenAI model: o200k_base for gpt-4o, gpt-4.1, gpt-4.5, gpt-5, the o-series
 * (o1, o3, o4…) and gpt-oss; cl100k_base for gpt-4, gpt-3.5 and any model it does not know (an
 * OpenAI-compatible server's model, an Azure deployment name).
 */
export function openaiEncodingFor(model: string): OpenAIEncoding {
  return /^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[1-9](?![0-9]))/.test(normalizeModel(model))
    ? 'o200k_base'
    : 'cl100k_base';
}

// ---- encoders, loaded and built on first use ------------------------------------------------------------

interface Counter {
  count(text: string): number;
}

const require = createRequire(import.meta.url);
const counters = new Map<string, Counter>();

/**
 * BPE is quadratic in the length of a pre-token (a regex match: a word, a run of symbols or spaces), and
 * js-tiktoken's merge loop is slow enough that one long pre-token blocks the event loop for minutes: 20,000
 * characters of Thai (no spaces: one pre-token) take ~8.5 minutes, 20,000 letters "y" ~30 s, 20,000 of
 * Japanese ~0.5 s. So the text is pre-tokenized here with the encoding's own pattern: runs of short
 * pre-tokens go to the tokenizer as they are, and each pre-token longer than `longPiece` UTF-16 units is
 * counted apart, by countLong.
 */
function countPieces(
  text: string,
  pattern: RegExp,
  longPiece: number,
  countRun: (run: string) => number,
  countLong: (piece: string) => number,
): number {
  let total = 0;
  let runStart = 0;
  for (const match of text.matchAll(pattern)) {
    if (match[0].length <= longPiece) continue;
    if (match.index > runStart) total += countRun(text.slice(runStart, match.index));
    total += countLong(match[0]);
    runStart = match.index + match[0].length;
  }
  if (runStart < text.length) total += countRun(runStart === 0 ? text : text.slice(runStart));
  return total;
}

const utf8 = new TextEncoder();

/**
 * The tokens of one pre-token as tiktoken encodes it: one when the whole is a token, else byte-pair merging
 * (always merge the adjacent pair of lowest rank, the leftmost on a tie), here with a heap instead of a
 * rescan after every merge: O(n log n) instead of O(n²). `rankOf` answers the rank of a byte string as
 * js-tiktoken keys it ("104,105"), or undefined when it is no token.
 */
export function bytePairCount(bytes: Uint8Array, rankOf: (key: string) => number | undefined): number {
  const n = bytes.length;
  const key = (from: number, to: number) => bytes.subarray(from, to).join(',');
  if (n <= 1 || rankOf(key(0, n)) !== undefined) return Math.min(n, 1);
  // Parts as a linked list of start offsets: the part starting at i spans [i, next[i]).
  const next = new Int32Array(n + 1);
  const prev = new Int32Array(n + 1);
  const alive = new Uint8Array(n + 1).fill(1);
  for (let i = 0; i <= n; i++) {
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  // A binary min-heap of candidate merges [rank, start, end], ordered by rank, then start.
  const heap: [number, number, number][] = [];
  const less = (a: [number, number, number], b: [number, number, number]) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
  const push = (start: number) => {
    if (start < 0) return;
    const mid = next[start]!;
    if (mid >= n) return;
    const end = next[mid]!;
    const rank = rankOf(key(start, end));
    if (rank === undefined) return;
    heap.push([rank, start, end]);
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!less(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  };
  const pop = () => {
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length) {
      heap[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && less(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && less(heap[r]!, heap[m]!)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    }
    return top;
  };
  for (let i = 0; i < n - 1; i++) push(i);
  let parts = n;
  while (heap.length) {
    const [, start, end] = pop();
    // Stale when a merge since changed either part: then the pair no longer spans [start, end).
    if (!alive[start] || next[start]! >= n || next[next[start]!] !== end) continue;
    const mid = next[start]!;
    alive[mid] = 0;
    next[start] = end;
    prev[end] = start;
    parts--;
    push(prev[start]!);
    push(start);
  }
  return parts;
}

function tiktokenCounter(encoding: OpenAIEncoding): Counter {
  const key = `openai:${encoding}`;
  let counter = counters.get(key);
  if (!counter) {
    const { Tiktoken } = require('js-tiktoken/lite') as typeof import('js-tiktoken/lite');
    const ranksModule = require(`js-tiktoken/ranks/${encoding}`) as
      | import('js-tiktoken/lite').TiktokenBPE
      | { default: import('js-tiktoken/lite').TiktokenBPE };
    const ranks = 'default' in ranksModule ? ranksModule.default : ranksModule;
    const encoder = new Tiktoken(ranks);
    const pattern = new RegExp(ranks.pat_str, 'gu'); // as js-tiktoken pre-tokenizes
    // allowedSpecial [] and disallowedSpecial []: "<|endoftext|>" in a text is counted as the plain text
    // it is (as the APIs treat message content) instead of making encode() throw, its default.
    const countRun = (run: string) => encoder.encode(run, [], []).length;
    // Pre-tokens over 8 UTF-16 units are merged here, exactly as js-tiktoken would but O(n log n), with its
    // own rank table (internal, keyed "104,105"); measured fastest for Japanese and Thai, as fast for
    // English. Should a later version lose the table, they are counted in slices of 32 code points (exact
    // up to that length, a few tokens over beyond it, never slow).
    const rankMap = (encoder as unknown as { rankMap?: unknown }).rankMap;
    const countLong =
      rankMap instanceof Map
        ? (piece: string) => bytePairCount(utf8.encode(piece), (k) => rankMap.get(k) as number | undefined)
        : (piece: string) => countInSlices(piece, 32, countRun);
    counter = { count: (text) => countPieces(text, pattern, 8, countRun, countLong) };
    counters.set(key, counter);
  }
  return counter;
}

/** A long pre-token counted slice by slice (whole code points): a few tokens too many, at most. */
function countInSlices(piece: string, slice: number, countRun: (run: string) => number): number {
  const codePoints = [...piece];
  let total = 0;
  for (let i = 0; i < codePoints.length; i += slice) total += countRun(codePoints.slice(i, i + slice).join(''));
  return total;
}

function claudeCounter(): Counter {
  let counter = counters.get('anthropic');
  if (!counter) {
    const { getTokenizer } = require('@anthropic-ai/tokenizer') as typeof import('@anthropic-ai/tokenizer');
    const { pat_str } = require('@anthropic-ai/tokenizer/dist/cjs/claude.json') as { pat_str: string };
    // The package's own countTokens() builds (and frees) a new WASM tokenizer on every call; keep one.
    // It lives as long as the process, so it is never freed. NFKC + 'all' is what countTokens() does.
    const tokenizer = getTokenizer();
    const pattern = new RegExp(pat_str, 'gu');
    const countRun = (run: string) => tokenizer.encode(run, 'all').length;
    // The WASM merge is fast but still quadratic (20,000 emoji in one pre-token: ~1 s), so pre-tokens over
    // 256 UTF-16 units are counted in slices of 128 code points. The count is rough for Claude 3+ anyway.
    counter = {
      count: (text) => countPieces(text.normalize('NFKC'), pattern, 256, countRun, (p) => countInSlices(p, 128, countRun)),
    };
    counters.set('anthropic', counter);
  }
  return counter;
}

function counterFor(kind: TokenizerKind, model: string): Counter {
  switch (kind) {
    case 'openai':
      return tiktokenCounter(openaiEncodingFor(model));
    case 'anthropic':
      return claudeCounter();
    case 'sim':
      return tiktokenCounter('cl100k_base');
  }
}

// ---- the API ----------------------------------------------------------------------------------------------

/** Tokens of a bare text under the provider's tokenizer (no message overhead). */
export function countTextTokens(kind: TokenizerKind, model: string, text: string): number {
  return counterFor(kind, model).count(text);
}

/**
 * Tokens the rendered prompt takes as the request's input: the system and user messages (an empty system
 * prompt is not sent) with the per-message overhead and the reply priming. An estimate of the provider's
 * own count: exact for the text of OpenAI models, rough for Claude 3 and later (see ESTIMATE_MARGIN). It
 * does not include the output JSON Schema a structured-output request also sends.
 */
export function countPromptTokens(kind: TokenizerKind, model: string, prompt: Prompt): number {
  const counter = counterFor(kind, model);
  let tokens = TOKENS_PER_REPLY_PRIMING;
  for (const message of [prompt.system, prompt.user]) {
    if (message) tokens += TOKENS_PER_MESSAGE + counter.count(message);
  }
  return tokens;
}

/**
 * The model's context window: the configured one when given (the operator knows the deployment best),
 * else the table CONTEXT_WINDOWS, else DEFAULT_CONTEXT_WINDOW. The kind does not matter: models are told
 * apart by name.
 */
export function contextWindow(_kind: TokenizerKind, model: string, configured?: number): number {
  if (configured !== undefined) {
    if (!Number.isSafeInteger(configured) || configured <= 0) {
      throw new RangeError(`the configured context window must be a positive integer, not ${configured}`);
    }
    return configured;
  }
  const name = normalizeModel(model);
  return CONTEXT_WINDOWS.find((w) => w.pattern.test(name))?.tokens ?? DEFAULT_CONTEXT_WINDOW;
}

export type PromptFit = { ok: true; promptTokens: number } | { ok: false; promptTokens: number; reason: string };

/**
 * Whether the prompt, with maxOutputTokens of room for the output, fits the model's context window:
 * ceil(promptTokens × ESTIMATE_MARGIN[kind]) + maxOutputTokens ≤ contextWindow(kind, model, configured).
 */
export function checkPromptFits(
  kind: TokenizerKind,
  model: string,
  prompt: Prompt,
  maxOutputTokens: number,
  configuredContext?: number,
): PromptFit {
  if (!Number.isSafeInteger(maxOutputTokens) || maxOutputTokens <= 0) {
    throw new RangeError(`maxOutputTokens must be a positive integer, not ${maxOutputTokens}`);
  }
  const context = contextWindow(kind, model, configuredContext);
  const promptTokens = countPromptTokens(kind, model, prompt);
  const budgeted = Math.ceil(promptTokens * ESTIMATE_MARGIN[kind]);
  if (budgeted + maxOutputTokens <= context) return { ok: true, promptTokens };
  const counted = budgeted === promptTokens ? `${promptTokens}` : `${promptTokens} (${budgeted} with the estimate's margin)`;
  return {
    ok: false,
    promptTokens,
    reason:
      `the prompt takes ${counted} tokens and the output may take ${maxOutputTokens}: ` +
      `${budgeted + maxOutputTokens} tokens do not fit ${model}'s context window of ${context}`,
  };
}
