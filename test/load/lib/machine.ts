// What the figures were measured on: they only compare within one run on one machine.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { tasksetAvailable } from './proc.js';

export interface MachineInfo {
  cpus: number;
  model: string;
  node: string;
  platform: string;
  kernel: string;
  memoryGb: number;
  fileDescriptorLimit: string | null;
  taskset: boolean;
  ephemeralPorts: string | null;
}

const readTrimmed = (file: string) => {
  try {
    return readFileSync(file, 'utf8').trim().replace(/\s+/g, '-');
  } catch {
    return null;
  }
};

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  let fds: string | null = null;
  try {
    const limits = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
    fds = limits?.split(/\s{2,}/)[1] ?? null;
  } catch {
    fds = null;
  }
  return {
    cpus: cpus.length,
    model: cpus[0]?.model ?? 'unknown',
    node: process.version,
    platform: `${os.platform()} ${os.arch()}`,
    kernel: os.release(),
    memoryGb: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    fileDescriptorLimit: fds,
    taskset: tasksetAvailable(),
    ephemeralPorts: readTrimmed('/proc/sys/net/ipv4/ip_local_port_range'),
  };
}
