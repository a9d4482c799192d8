import { createContext } from "preact";
import { useContext } from "preact/hooks";

import type { LiveSession } from "../live";

/** The open session, for the cards that act on it (approve, answer, fork, revert). */
export const LiveContext = createContext<LiveSession | null>(null);

export function useLive(): LiveSession {
  const live = useContext(LiveContext);
  if (!live) throw new Error("no open session");
  return live;
}

/** Moves focus back to the prompt box after an answer. */
export function focusPrompt(): void {
  document.getElementById("prompt")?.focus();
}
