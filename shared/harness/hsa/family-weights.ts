import { z } from 'zod';
import { hsaFamilies } from './variant-mapping';

/** Share of variants that apply each HSA family, 0..1 (augment's and rl's `families`). */
export const augmentFamilyWeightsSchema = z
  .object(
    Object.fromEntries(hsaFamilies.map((family) => [family, z.number().min(0).max(1).optional()])) as Record<
      (typeof hsaFamilies)[number],
      z.ZodOptional<z.ZodNumber>
    >,
  )
  .strict()
  .refine((weights) => Object.values(weights).some((weight) => (weight ?? 0) > 0), {
    error: 'at least one family needs a weight above 0',
  });
