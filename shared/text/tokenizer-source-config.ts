import { z } from 'zod';
import { tokenizerPresets } from './load-chat-tokenizer';

/** A tokenizer to load locally: a registry preset or a model directory. */
export const tokenizerSourceSchema = z
  .object({
    preset: z.enum(Object.keys(tokenizerPresets) as [keyof typeof tokenizerPresets]).optional(),
    modelDir: z.string().min(1).optional(),
    /** How hook system messages reach the template: `auto` (default) tries it; see shared/text/hook-messages.ts. */
    hookMessages: z.enum(['auto', 'system-messages', 'folded']).optional(),
  })
  .strict()
  .refine(
    (value) => (value.preset === undefined) !== (value.modelDir === undefined),
    'give exactly one of preset or modelDir',
  );
