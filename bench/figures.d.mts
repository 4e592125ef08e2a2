/** One benchmark's part of docs/performance.md's generated block (bench/figures.mjs). */
export interface Section {
  name: string;
  /** The line naming the run that measured it, after `**name**: `. */
  measured: string;
  /** The table's lines, as written. */
  rows: string[];
}
export const START: string;
export const END: string;
export function readSections(text: string): Section[];
export function measuredLine(whenAndMachine: string, node: string, runs?: number | string): string;
export function mergeSections(previous: Section[], fresh: Section[], order: string[]): Section[];
export function renderBlock(sections: Section[]): string;
export function replaceBlock(text: string, block: string): string;
export function fmt(n: number): string;
