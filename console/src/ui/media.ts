import { useEffect, useState } from "preact/hooks";

/** Whether a media query matches, following changes (a rotated phone, a resized window). */
export function useMedia(query: string): boolean {
  const [matches, setMatches] = useState(() => matchMedia(query).matches);
  useEffect(() => {
    const list = matchMedia(query);
    const update = (): void => setMatches(list.matches);
    list.addEventListener("change", update);
    update();
    return () => list.removeEventListener("change", update);
  }, [query]);
  return matches;
}

export const WIDE = "(min-width: 900px)";
