// Outcome effects (CONTRACT.md section 8): setCallback, callback and usage. Every one of them is the
// caller's own owner's: no argument names an owner, for operators too.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { findCallback, upsertCallback } from '../db/callbacks.ts';
import { findUsage } from '../db/usage.ts';
import { builder } from '../schema/builder.ts';
import { CallbackRef } from '../schema/callback.ts';
import { UsageRef } from '../schema/usage.ts';

export const MAX_CALLBACK_URL_LENGTH = 2048;
export const MAX_USAGE_ENTRIES = 1000;
/** 32 random bytes: within the 24..64 bytes Standard Webhooks recommends for a secret. */
const SECRET_BYTES = 32;

/**
 * An absolute http(s) URL with a host, as sent (not normalised, so the answer shows what was given).
 * Whitespace and control characters are refused rather than silently percent-encoded by the parser.
 * Hazard not handled here: the URL may name a private or loopback address; the delivery worker will
 * POST there (tests rely on 127.0.0.1). A deployment exposed to untrusted owners should restrict
 * destinations at the network level.
 */
const CallbackUrl = z
  .string()
  .min(1, 'give the URL to POST notifications to')
  .max(MAX_CALLBACK_URL_LENGTH, `must be at most ${MAX_CALLBACK_URL_LENGTH} characters`)
  .superRefine((text, ctx) => {
    if (/[\u0000-\u0020\u007f-\u009f]/.test(text)) {
      ctx.addIssue({ code: 'custom', message: 'must not contain whitespace or control characters' });
      return;
    }
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be an absolute URL, e.g. https://example.com/onejob' });
      return;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: `must be an http or https URL, not ${url.protocol.replace(/:$/, '')}` });
    } else if (!url.hostname) {
      ctx.addIssue({ code: 'custom', message: 'must name a host' });
    }
  });

/** A fresh Standard Webhooks secret: `whsec_` and base64 of random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(SECRET_BYTES).toString('base64')}`;
}

builder.mutationField('setCallback', (t) =>
  t.field({
    type: CallbackRef,
    description:
      'Sets where your job outcomes are POSTed (Standard Webhooks) and answers a fresh signing secret. Calling it again replaces both; ' +
      'notifications already queued keep the URL and secret they were queued with.',
    args: { url: t.arg.string({ required: true, validate: CallbackUrl }) },
    resolve: async (_, { url }, { core, caller }) => {
      const stored = await upsertCallback(core.pool, { ownerId: caller.ownerId, url, secret: newWebhookSecret(), now: core.clock.now() });
      return { url: stored.url, secret: stored.secret, updatedAt: stored.updatedAt };
    },
  }),
);

builder.queryField('callback', (t) =>
  t.field({
    type: CallbackRef,
    nullable: true,
    description: 'Your callback, without its secret (answered only by setCallback); null when none is set',
    resolve: async (_, __, { core, caller }) => {
      const found = await findCallback(core.pool, caller.ownerId);
      return found ? { url: found.url, secret: null, updatedAt: found.updatedAt } : null;
    },
  }),
);

builder.queryField('usage', (t) =>
  t.field({
    type: UsageRef,
    description: `Your usage ledger: the total, and the newest \`first\` entries (default and at most ${MAX_USAGE_ENTRIES})`,
    args: { first: t.arg.int({ validate: z.number().int().min(1).max(MAX_USAGE_ENTRIES) }) },
    resolve: (_, { first }, { core, caller }) => findUsage(core.pool, caller.ownerId, first ?? MAX_USAGE_ENTRIES),
  }),
);
