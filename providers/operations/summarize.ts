import { z } from 'zod';
import type { Operation } from './types.ts';

const input = z.strictObject({ text: z.string().min(1).max(20_000) });
const output = z.strictObject({
  summary: z.string().min(1).max(2_000),
  keyPoints: z.array(z.string().min(1).max(300)).min(1).max(10),
});

export const summarize: Operation<z.infer<typeof input>, z.infer<typeof output>> = {
  name: 'summarize',
  input,
  output,
  businessRule: (i, o) =>
    [...o.summary].length < [...i.text].length ? undefined : 'the summary is not shorter than the text',
};
