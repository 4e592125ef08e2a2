/**
 * Text from outside the process (a journal, a KVP pool, an OTLP export, a file name) as it may reach a terminal:
 * control characters (C0, DEL and C1, which carry terminal escapes and line breaks) and the bidirectional overrides
 * are written as `\xNN` / `\u{NNNN}`, the rest as it is. With `keepLines`, newlines and tabs stay, so a text prints
 * as the lines it had and nothing else.
 */

const ONE_LINE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
const KEEP_LINES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** `text` safe to print: one line, or (`keepLines`) the lines it had. */
export function terminalSafe(text: string, keepLines = false): string {
  return text.replace(keepLines ? KEEP_LINES : ONE_LINE, (char) => {
    const code = char.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
  });
}
