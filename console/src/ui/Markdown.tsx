import { memo } from "preact/compat";
import { useLayoutEffect, useRef } from "preact/hooks";

import { renderMarkdown } from "../markdown";

/**
 * The agent's text as sanitized markdown. The HTML is set only when the text changed, and
 * once per frame at most (the transcript renders per frame), so a streaming answer grows
 * without flicker and a finished one is never touched again.
 */
export const Markdown = memo(function Markdown({ text }: { text: string }) {
  const ref = useRef<HTMLDivElement>(null);
  useLayoutEffect(() => {
    // The one place the console writes HTML: DOMPurify's output (markdown.ts).
    if (ref.current) ref.current.innerHTML = renderMarkdown(text);
  }, [text]);
  return <div class="markdown" ref={ref} />;
});
