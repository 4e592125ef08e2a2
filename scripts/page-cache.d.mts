/** Writes `file` back and drops its cached pages; throws when dd cannot (scripts/page-cache.mjs). */
export function dropFromPageCache(file: string): void;
