/**
 * Tool failures the model can read and recover from. Tools never throw on bad calls: the model
 * gets `{"error": {"code": ..., "message": ...}}` as the tool result, like a real API's 4xx body.
 */
export const toolErrorCodes = [
  'INVALID_JSON',
  'UNKNOWN_TOOL',
  'SCHEMA_VIOLATION',
  'MISSING_ARGUMENT',
  'INVALID_ARGUMENT',
  'ITEM_NOT_FOUND',
  'SKU_NOT_FOUND',
  'OPTION_NOT_FOUND',
  'NO_SIZE_CHART',
] as const;
export type ToolErrorCode = (typeof toolErrorCodes)[number];

export interface ToolError {
  code: ToolErrorCode;
  message: string;
}

/** A capability's failed result (returned, never thrown). */
export class ToolFailure {
  constructor(readonly error: ToolError) {}
}

export function toolFailure(code: ToolErrorCode, message: string): ToolFailure {
  return new ToolFailure({ code, message });
}

export function toolErrorContent(error: ToolError): string {
  return JSON.stringify({ error });
}
