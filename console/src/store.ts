/** A value that components follow: `useValue(store)` re-renders when `set` changes it. */
import { useEffect, useState } from "preact/hooks";

export class Store<T> {
  #value: T;
  readonly #listeners = new Set<() => void>();

  constructor(value: T) {
    this.#value = value;
  }

  get value(): T {
    return this.#value;
  }

  set(value: T): void {
    this.#value = value;
    this.notify();
  }

  /** Tells the followers that the value changed in place. */
  notify(): void {
    for (const listener of [...this.#listeners]) listener();
  }

  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

/** The store's value; the component renders again whenever it changes. */
export function useValue<T>(store: Store<T>): T {
  const [, setTick] = useState(0);
  useEffect(() => store.subscribe(() => setTick((tick) => tick + 1)), [store]);
  return store.value;
}
