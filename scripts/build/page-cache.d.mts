/** Writes `file` back and drops its cached pages; throws when dd cannot (scripts/build/page-cache.mjs). */
export function dropFromPageCache(file: string): void;
