import { z } from 'zod';
import type { Operation } from './types.ts';

const input = z.strictObject({
  text: z.string().min(1).max(20_000),
  labels: z
    .array(z.string().min(1))
    .min(2)
    .max(50)
    .refine((labels) => new Set(labels).size === labels.length, 'labels must be distinct'),
});
const output = z.strictObject({ label: z.string(), confidence: z.number().min(0).max(1) });

export const classify: Operation<z.infer<typeof input>, z.infer<typeof output>> = {
  name: 'classify',
  input,
  output,
  businessRule: (i, o) =>
    i.labels.includes(o.label) ? undefined : `the label "${o.label}" is not one of the input's labels`,
};
