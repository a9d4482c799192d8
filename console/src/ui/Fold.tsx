import { useState } from "preact/hooks";

const FOLD_AT = 24;

/** Long text folded to its last lines, with a button to show it all. */
export function Folded({ text, className }: { text: string; className: string }) {
  const [open, setOpen] = useState(false);
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const folded = !open && lines.length > FOLD_AT;
  const shown = folded ? lines.slice(-FOLD_AT).join("\n") : text;
  return (
    <div class="fold">
      {folded && (
        <button type="button" class="link fold-toggle" onClick={() => setOpen(true)}>
          Show all {lines.length} lines
        </button>
      )}
      <pre class={className}>{shown}</pre>
    </div>
  );
}
