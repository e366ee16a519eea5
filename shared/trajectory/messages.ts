import { z } from 'zod';

/** OpenAI chat messages and tools: the wire and storage format of every trajectory. */

export const toolCallSchema = z.object({
  id: z.string().min(1),
  type: z.literal('function'),
  function: z.object({
    name: z.string(),
    /** The JSON string the model produced (may be invalid JSON: that is recorded, not repaired). */
    arguments: z.string(),
  }),
});
export type ToolCall = z.infer<typeof toolCallSchema>;

export const systemMessageSchema = z.object({ role: z.literal('system'), content: z.string() });
export const userMessageSchema = z.object({ role: z.literal('user'), content: z.string() });
export const assistantMessageSchema = z.object({
  role: z.literal('assistant'),
  content: z.string().nullable(),
  tool_calls: z.array(toolCallSchema).optional(),
  /** Reasoning text when the backend returns it separately (thinking models). */
  reasoning_content: z.string().optional(),
});
export const toolMessageSchema = z.object({ role: z.literal('tool'), content: z.string(), tool_call_id: z.string() });

export const chatMessageSchema = z.discriminatedUnion('role', [
  systemMessageSchema,
  userMessageSchema,
  assistantMessageSchema,
  toolMessageSchema,
]);
export type ChatMessage = z.infer<typeof chatMessageSchema>;
export type SystemMessage = z.infer<typeof systemMessageSchema>;
export type UserMessage = z.infer<typeof userMessageSchema>;
export type AssistantMessage = z.infer<typeof assistantMessageSchema>;
export type ToolMessage = z.infer<typeof toolMessageSchema>;

export const toolSpecSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()),
  }),
});
export type ToolSpec = z.infer<typeof toolSpecSchema>;
