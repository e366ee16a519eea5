import { z } from 'zod';
import { tokenizerPresets, type TokenizerPreset } from './load-chat-tokenizer';

/**
 * The one way every stage names a tokenizer to load locally (shard's target model, rl's policy,
 * distill's student and teacher, replay's output-token counter): a registry preset or a model
 * directory (neither: the `qwen3` preset), optionally a chat template that replaces the model's
 * own, and how hook messages reach the template. A stage reads `chatTemplate` through its
 * artifact store (queues/stage-kit/load-tokenizer-source.ts), so `s3://` works on every worker.
 */
export const tokenizerSourceSchema = z
  .object({
    /** A registry tokenizer package: qwen3, deepseek_v3 or llama3_1. Default qwen3 when no modelDir is given. */
    preset: z.enum(Object.keys(tokenizerPresets) as [TokenizerPreset, ...TokenizerPreset[]]).optional(),
    /** A directory with tokenizer.json and tokenizer_config.json (and optionally chat_template.jinja), mounted on every worker. */
    modelDir: z.string().min(1).optional(),
    /** A chat template that replaces the model's own: a `.jinja` file as a path, `file://` or `s3://` URI. */
    chatTemplate: z.string().min(1).optional(),
    /**
     * How hook system messages after the first turn reach the template: `auto` (default) tries the
     * template, `system-messages` keeps them, `folded` folds them into the neighbouring user turn or
     * tool result as a `<system-reminder>` block (shared/text/hook-messages.ts).
     */
    hookMessages: z.enum(['auto', 'system-messages', 'folded']).optional(),
  })
  .strict()
  .refine((source) => source.preset === undefined || source.modelDir === undefined, {
    error: 'give either preset or modelDir, not both',
  });
export type TokenizerSource = z.infer<typeof tokenizerSourceSchema>;
