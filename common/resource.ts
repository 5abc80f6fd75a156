/** Arithmetic on resources (vcores in thousandths, memory in MB). */

/** An amount of compute. */
export interface Resources {
  vcoresMilli: number;
  memoryMb: number;
}

/** No resources. */
export const ZERO: Readonly<Resources> = Object.freeze({ vcoresMilli: 0, memoryMb: 0 });

export function add(a: Resources, b: Resources): Resources {
  return { vcoresMilli: a.vcoresMilli + b.vcoresMilli, memoryMb: a.memoryMb + b.memoryMb };
}

export function sub(a: Resources, b: Resources): Resources {
  return { vcoresMilli: a.vcoresMilli - b.vcoresMilli, memoryMb: a.memoryMb - b.memoryMb };
}

/** True when `need` fits in `available` on both dimensions. */
export function fits(need: Resources, available: Resources): boolean {
  return need.vcoresMilli <= available.vcoresMilli && need.memoryMb <= available.memoryMb;
}

/** Reads a possibly-missing wire resource. */
export function fromWire(r: { vcoresMilli?: number; memoryMb?: number } | null | undefined): Resources {
  return { vcoresMilli: r?.vcoresMilli ?? 0, memoryMb: r?.memoryMb ?? 0 };
}
