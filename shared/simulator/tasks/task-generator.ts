import { z } from 'zod';
import { maxWorldItems } from '../world/generate-world';
import { taskCategories } from './task-schema';

const seedValue = z.union([z.string().min(1), z.number().int()]).transform(String);

/** Generated simulator tasks (collect's and rl's `generate`): count, seed, catalog size, category weights. */
export const taskGeneratorSchema = z
  .object({
    count: z.number().int().min(1).max(100_000),
    seed: seedValue,
    /** Catalog size the rooms are drawn from. Default 2000 (as `hat tasks generate`). */
    itemCount: z.number().int().min(50).max(maxWorldItems).optional(),
    /** Relative category weights; missing categories keep their default, 0 leaves one out. */
    categoryWeights: z.partialRecord(z.enum(taskCategories), z.number().min(0)).optional(),
  })
  .strict();
export type TaskGenerator = z.infer<typeof taskGeneratorSchema>;
