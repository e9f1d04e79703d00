// The process's built-in methods as they were when the server started, and a way to keep them so around libraries
// that replace them (core-js polyfills bundled into a dependency overwrite natives it judges non-conforming).
// Methods a library adds (ones this Node lacks) stay: the library may need them; replaced ones are put back.

const TYPED_ARRAY = Object.getPrototypeOf(Uint8Array) as object;

/** Where built-in methods live, by name. */
const OWNERS: [name: string, owner: object][] = [
  ...([Array, Object, Function, String, Number, Boolean, Promise, Map, Set, WeakMap, WeakSet, RegExp, Date, Symbol, Error, ArrayBuffer, Uint8Array] as const).flatMap(
    (ctor): [string, object][] => [[ctor.name, ctor], [`${ctor.name}.prototype`, ctor.prototype as object]],
  ),
  ['TypedArray', TYPED_ARRAY],
  ['TypedArray.prototype', (TYPED_ARRAY as { prototype: object }).prototype],
  ['JSON', JSON],
  ['Math', Math],
  ['Reflect', Reflect],
];

type Snapshot = [name: string, owner: object, key: string | symbol, descriptor: PropertyDescriptor][];

function snapshot(): Snapshot {
  const out: Snapshot = [];
  for (const [name, owner] of OWNERS) {
    for (const key of Reflect.ownKeys(owner)) {
      const descriptor = Object.getOwnPropertyDescriptor(owner, key);
      // Methods only: data such as RegExp's legacy statics changes by itself.
      if (descriptor && typeof descriptor.value === 'function') out.push([`${name}.${String(key)}`, owner, key, descriptor]);
    }
  }
  return out;
}

/** Taken when this module loads, early in startup, before any library could replace anything. */
const ORIGINAL = snapshot();

/** Puts back every original built-in method a library replaced since startup; returns their names. */
export function restoreBuiltins(): string[] {
  const restored: string[] = [];
  for (const [name, owner, key, descriptor] of ORIGINAL) {
    if (Object.getOwnPropertyDescriptor(owner, key)?.value === descriptor.value) continue;
    Object.defineProperty(owner, key, descriptor);
    restored.push(name);
  }
  return restored;
}

/**
 * Runs `fn` (which loads or runs such a library), then restores the built-ins, also when it throws. While it runs,
 * the rest of the process may see the library's versions: they behave the same, only slower.
 */
export async function keepingBuiltins<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } finally {
    restoreBuiltins();
  }
}
