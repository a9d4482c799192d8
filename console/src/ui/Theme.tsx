import { useEffect, useState } from "preact/hooks";

const THEME_KEY = "agent-gateway.theme";
type Choice = "system" | "light" | "dark";
const NEXT: Record<Choice, Choice> = { system: "dark", dark: "light", light: "system" };

/** Applies the stored theme before the first render (no flash of the other one). */
export function applyStoredTheme(): void {
  const choice = (localStorage.getItem(THEME_KEY) as Choice | null) ?? "system";
  if (choice === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = choice;
}

/** Light, dark, or as the system says; kept in localStorage. */
export function Theme() {
  const [choice, setChoice] = useState<Choice>(() => (localStorage.getItem(THEME_KEY) as Choice | null) ?? "system");
  useEffect(() => {
    localStorage.setItem(THEME_KEY, choice);
    applyStoredTheme();
  }, [choice]);
  return (
    <button type="button" class="icon theme" aria-label={`Theme: ${choice} (change)`} title={`Theme: ${choice}`} onClick={() => setChoice(NEXT[choice])}>
      {choice === "dark" ? "☾" : choice === "light" ? "☀" : "◐"}
    </button>
  );
}
