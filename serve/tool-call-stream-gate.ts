import type { ToolCallParser } from '../shared/text/tool-parsers';

/**
 * Decides how much of a streamed reply can go out as content while a tool parser is active:
 * everything before the first tool-call marker, holding back a tail that could still grow into
 * one (`<tool_` may become `<tool_call>`). For formats whose calls are the whole reply (Llama
 * JSON), leading whitespace waits and a reply that starts with a marker is held entirely. What is
 * held goes out at the end, parsed (content remainder and tool_calls deltas).
 */
export class ToolCallStreamGate {
  private text = '';
  private released = 0;
  private heldFrom: number | undefined;

  constructor(private readonly parser: ToolCallParser | null) {}

  /** Adds generated text; returns the content that may be sent now ('' when nothing). */
  push(delta: string): string {
    this.text += delta;
    if (!this.parser) return this.release(this.text.length);
    const onlyAtStart = this.parser.callsOnlyAtStart === true;
    this.heldFrom ??= callStart(this.text, this.parser.startMarkers, onlyAtStart);
    return this.release(this.heldFrom ?? safeEnd(this.text, this.parser.startMarkers, onlyAtStart));
  }

  /** Whether a tool call has begun (the rest of the reply is held). */
  get holding(): boolean {
    return this.heldFrom !== undefined;
  }

  /** The content sent so far. */
  get sent(): string {
    return this.text.slice(0, this.released);
  }

  /** What the final parsed content adds to what was already sent ('' if the sent text is all of it). */
  remainder(parsedContent: string | null): string {
    if (parsedContent === null) return '';
    // The parsed content is trimmed; what was sent may carry whitespace on either side.
    for (const sent of [this.sent, this.sent.trimStart(), this.sent.trim()])
      if (parsedContent.startsWith(sent)) return parsedContent.slice(sent.length);
    return parsedContent;
  }

  private release(end: number): string {
    if (end <= this.released) return '';
    const out = this.text.slice(this.released, end);
    this.released = end;
    return out;
  }
}

/** Where a tool call begins in the text, if one has. */
function callStart(text: string, markers: readonly string[], onlyAtStart: boolean): number | undefined {
  if (onlyAtStart) {
    const trimmed = text.trimStart();
    if (trimmed === '') return undefined;
    return markers.some((marker) => trimmed.startsWith(marker)) ? 0 : undefined;
  }
  const found = markers.map((marker) => text.indexOf(marker)).filter((index) => index >= 0);
  return found.length > 0 ? Math.min(...found) : undefined;
}

/** How much can go out: all but a tail that could still become a marker (start-only formats: nothing while the start is undecided). */
function safeEnd(text: string, markers: readonly string[], onlyAtStart: boolean): number {
  if (onlyAtStart) {
    const trimmed = text.trimStart();
    // Still whitespace, or a prefix of a marker (`<|python` …): undecided.
    if (trimmed === '' || markers.some((marker) => marker.startsWith(trimmed))) return 0;
    return text.length;
  }
  let end = text.length;
  for (const marker of markers) {
    for (let length = Math.min(marker.length - 1, text.length); length > 0; length--) {
      if (text.endsWith(marker.slice(0, length))) {
        end = Math.min(end, text.length - length);
        break;
      }
    }
  }
  return end;
}
