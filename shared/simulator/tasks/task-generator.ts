import { z } from 'zod';
import { BadInputError } from '../../errors';
import { maxWorldItems } from '../world/generate-world';
import { textStyles } from '../world/text-style';
import { generateTasks } from './generate-tasks';
import { taskCategories, type Task } from './task-schema';

const seedValue = z.union([z.string().min(1), z.number().int()]).transform(String);

const share = z.number().min(0).max(1);

/**
 * How viewers refer to the items they ask about (a scale knob: an item on screen is called with the
 * id the room context shows; one named by link number or by name needs a lookup first).
 */
export const referenceSharesSchema = z
  .object({
    /** Chance that the item asked about is the one on screen ("这个"). Default 0.5. */
    onScreen: share.optional(),
    /** Chance that an item not on screen is named by its link number rather than brand and kind. Default 0.6. */
    byLink: share.optional(),
  })
  .strict();

/** Generated simulator tasks (collect's, rl's and distill's `generate`): count, seed, catalog size, category weights, references, text. */
export const taskGeneratorSchema = z
  .object({
    count: z.number().int().min(1).max(100_000),
    seed: seedValue,
    /** Catalog size the rooms are drawn from. Default 2000 (as `hat tasks generate`). */
    itemCount: z.number().int().min(50).max(maxWorldItems).optional(),
    /** Relative category weights; missing categories keep their default, 0 leaves one out. */
    categoryWeights: z.partialRecord(z.enum(taskCategories), z.number().min(0)).optional(),
    references: referenceSharesSchema.optional(),
    /**
     * The text the rooms and viewers carry: `default` (the simulator's short text) or
     * `cjk-heavy` (production-log-like: long keyword titles, spec values, selling points, policy
     * notes and campaign scripts, viewer comments of several clauses with particles and emoji;
     * the same categories, rooms and intents as `default` for the same seed). Default `default`.
     */
    text: z.enum(textStyles).optional(),
  })
  .strict();
export type TaskGenerator = z.infer<typeof taskGeneratorSchema>;

/**
 * The tasks a stage's `generate` draws (tasks [start, start + count)). A generator that cannot
 * draw (every category weight 0) is refused as BAD_TASK_GENERATOR, naming the stage's field.
 */
export function generateTasksOf(generator: TaskGenerator & { start?: number }, field: string): Task[] {
  const { count, start, seed, itemCount, categoryWeights, references, text } = generator;
  try {
    return generateTasks({ count, start, seed, world: { itemCount }, categoryWeights, references, text });
  } catch (error) {
    if (error instanceof RangeError) throw new BadInputError('BAD_TASK_GENERATOR', `${field}: ${error.message}`);
    throw error;
  }
}
