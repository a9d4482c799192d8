import type { Session } from "@agent-gateway/client";

import { Store } from "../store";

/** First prompts sent from this console, shown before the gateway's `title` catches up. */
export const firstPrompts = new Store<Map<string, string>>(new Map());

export function metadataTitle(session: Session): string | null {
  const title = session.metadata?.title;
  return typeof title === "string" && title.trim() ? title.trim() : null;
}

/** What a person calls the session: its title, else its first prompt, else where it works. */
export function sessionTitle(session: Session, firstPrompt: string | null = null): string {
  const title = session.title ?? metadataTitle(session) ?? firstPrompt ?? firstPrompts.value.get(session.id);
  if (title) return oneLine(title);
  const place = session.repository ?? session.workspace ?? "";
  return `New session in ${place.split("/").filter(Boolean).pop() ?? "a workspace"}`;
}

export function oneLine(text: string, max = 80): string {
  const line = text.trim().split("\n")[0] ?? "";
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
