/**
 * The monitor's state file against real files: something planted under the temporary name a cycle writes first is
 * neither waited on nor written through, and a state too large to be one is not read into memory.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, constants, lstatSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadMonitorState, saveMonitorState } from '../../src/monitor/state-file.js';

const BOOT = '6f1c2a4e-0b7d-4c4e-9d0e-2b1f5a9c7e31';
const STATE = { heartbeatStreak: 1234, imdsStreak: null, versionsAvailable: true };

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'bootstate-state-file-'));
  file = path.join(dir, 'monitor-state.json');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('saveMonitorState', () => {
  it('does not wait on a FIFO left under its temporary name: it is replaced and the state saved', () => {
    const temporary = `${file}.${process.pid}.tmp`;
    execFileSync('mkfifo', [temporary]);
    // A reader held open, so a writer that opens the FIFO goes through (and the test fails) instead of hanging.
    const reader = openSync(temporary, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      expect(saveMonitorState(file, BOOT, STATE)).toBeNull();
    } finally {
      closeSync(reader);
    }
    expect(lstatSync(file).isFile()).toBe(true);
    expect(loadMonitorState(file, BOOT)).toEqual({ state: STATE });
    expect(() => lstatSync(temporary)).toThrow(/ENOENT/);
  });

  it('writes nothing through a symlink left under its temporary name', () => {
    const temporary = `${file}.${process.pid}.tmp`;
    const target = path.join(dir, 'target');
    writeFileSync(target, 'theirs\n');
    symlinkSync(target, temporary);
    saveMonitorState(file, BOOT, STATE);
    expect(readFileSync(target, 'utf8')).toBe('theirs\n');
    expect(lstatSync(file).isFile()).toBe(true);
  });
});

describe('loadMonitorState', () => {
  it('does not read a file far larger than a state into memory', () => {
    writeFileSync(file, `${JSON.stringify({ format: 1, bootId: BOOT, state: STATE })}${' '.repeat(128 * 1024)}`);
    expect(loadMonitorState(file, BOOT)).toMatchObject({ state: null, warn: true, discarded: expect.stringMatching(/larger than 65536 bytes/) });
  });
});
