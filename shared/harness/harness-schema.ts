import { z } from 'zod';
import {
  hookConditions,
  hookConstraintTypes,
  hookEvents,
  hookPlacements,
  mentionTargets,
  promptFormats,
  sectionKinds,
  toolCapabilities,
} from './harness-types';

/**
 * zod schemas of the three harness file kinds (`harness.yaml`, skill front matter, tool JSON).
 * Structure only: cross-file checks (references, duplicates, JSON Schema validity) live in
 * load-harness.ts. Objects are strict so a misspelt key is reported instead of ignored.
 */

/** Version of the on-disk layout; written to `harness.yaml` as `schemaVersion`. */
export const HARNESS_FILE_SCHEMA_VERSION = 1;

/** OpenAI function names; also used for tool file names. */
export const toolNamePattern = /^[A-Za-z0-9_-]{1,64}$/;
/** Skill ids name files, so they stay file-name safe. */
export const skillIdPattern = /^[A-Za-z0-9_-]{1,64}$/;
/** Section and hook ids: section ids become XML tag names in the `xml` prompt format. */
export const elementIdPattern = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

function oneOf<const T extends readonly [string, ...string[]]>(values: T, noun: string) {
  return z.enum(values, {
    error: (issue) =>
      issue.input === undefined
        ? `missing ${noun}; expected one of: ${values.join(', ')}`
        : `unknown ${noun} ${JSON.stringify(issue.input)}; expected one of: ${values.join(', ')}`,
  });
}

function identifier(pattern: RegExp, noun: string) {
  return z.string().regex(pattern, { error: `invalid ${noun}: use letters, digits, "_" or "-" (${pattern.source})` });
}

const nonEmptyText = (noun: string) =>
  z
    .string()
    .refine((text) => text.trim().length > 0, { error: `${noun} is empty; write the text or remove the entry` });

export const promptSectionSchema = z.strictObject({
  id: identifier(elementIdPattern, 'section id'),
  kind: oneOf(sectionKinds, 'section kind'),
  title: nonEmptyText('section title'),
  /** Lead-in for generated sections, may be empty there; checked per kind in load-harness.ts. */
  content: z.string().default(''),
});

const termList = (noun: string) => z.array(nonEmptyText(noun)).min(1, { error: `${noun} list is empty` });

export const hookConstraintSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('max_chars'), value: z.number().int().positive() }),
    z.strictObject({ type: z.literal('must_mention'), target: oneOf(mentionTargets, 'must_mention target') }),
    z.strictObject({ type: z.literal('banned_terms'), terms: termList('banned term') }),
    z.strictObject({
      type: z.literal('tone'),
      markers: termList('tone marker'),
      minMarkers: z.number().int().nonnegative().optional(),
    }),
    z.strictObject({ type: z.literal('none') }),
  ],
  {
    error: (issue) =>
      issue.code === 'invalid_union'
        ? `unknown constraint type ${JSON.stringify((issue.input as { type?: unknown } | undefined)?.type)}; expected one of: ${hookConstraintTypes.join(', ')}`
        : undefined,
  },
);

export const hookSchema = z.strictObject({
  id: identifier(elementIdPattern, 'hook id'),
  event: oneOf(hookEvents, 'hook event'),
  placement: oneOf(hookPlacements, 'hook placement'),
  when: oneOf(hookConditions, 'hook condition').default('always'),
  text: nonEmptyText('hook text'),
  constraint: hookConstraintSchema,
  skills: z.array(z.string()).optional(),
});

/** `harness.yaml`; sections and hooks are parsed one by one so one bad entry does not hide the others' problems. */
export const harnessFileSchema = z.strictObject({
  schemaVersion: z.literal(HARNESS_FILE_SCHEMA_VERSION).default(HARNESS_FILE_SCHEMA_VERSION),
  id: identifier(/^[A-Za-z0-9_.-]{1,128}$/, 'harness id'),
  version: z.string().min(1),
  persona: z.strictObject({ name: nonEmptyText('persona name'), style: z.string() }),
  prompt: z.strictObject({
    format: oneOf(promptFormats, 'prompt format'),
    sections: z.array(z.unknown()).min(1, { error: 'the prompt has no sections' }),
  }),
  hooks: z.array(z.unknown()).default([]),
  /** Model-visible order of skills and tools; absent means sorted by id/name. */
  order: z.strictObject({ skills: z.array(z.string()).optional(), tools: z.array(z.string()).optional() }).optional(),
  meta: z.record(z.string(), z.unknown()).optional(),
});

export const skillFrontMatterSchema = z.strictObject({
  id: identifier(skillIdPattern, 'skill id'),
  name: nonEmptyText('skill name'),
  description: nonEmptyText('skill description'),
  tools: z.array(z.string()).default([]),
});

export const toolBindingSchema = z.strictObject({
  capability: oneOf(toolCapabilities, 'capability'),
  arguments: z.record(z.string(), z.string()).optional(),
  enumValues: z.record(z.string(), z.record(z.string(), z.string())).optional(),
  ignoredArguments: z.array(z.string()).optional(),
});

export const toolFileSchema = z.strictObject({
  type: z.literal('function'),
  function: z.strictObject({
    name: identifier(toolNamePattern, 'function name'),
    description: nonEmptyText('function description'),
    parameters: z.record(z.string(), z.unknown()),
  }),
  'x-hat-binding': toolBindingSchema,
});
