import { useState } from "preact/hooks";

import { sideBySide, type DiffLine, type FileDiff } from "../diff";
import { useMedia, WIDE } from "./media";

const MINUS = "\u2212";
const FOLD_LINES = 400;

function Num({ value }: { value: number | null }) {
  return <span class="ln" aria-hidden="true">{value ?? ""}</span>;
}

function sign(line: DiffLine): string {
  return line.kind === "added" ? "+" : line.kind === "removed" ? "-" : " ";
}

/** One file's diff: side by side on a wide screen, unified on a narrow one. */
export function DiffView({ diff, label }: { diff: FileDiff; label?: string }) {
  const wide = useMedia(WIDE);
  const [all, setAll] = useState(false);
  const lines = all ? diff.lines : diff.lines.slice(0, FOLD_LINES);
  const rest = diff.lines.length - lines.length;
  return (
    <figure class="diff" aria-label={label ?? `Changes to ${diff.path}`}>
      <figcaption class="diff-head">
        <span class="diff-path">{diff.path}</span>
        <span class="diff-count">
          <span class="plus">+{diff.additions}</span> <span class="minus">{MINUS}{diff.deletions}</span>
        </span>
      </figcaption>
      <div class="diff-body" tabIndex={0}>
        {wide ? (
          <table class="diff-split">
            <tbody>
              {sideBySide(lines).map(([left, right], index) => (
                <tr key={index}>
                  <td class={`side ${left?.kind ?? "empty"}`}>
                    <Num value={left?.oldNo ?? null} />
                    <code>{left ? (left.kind === "hunk" || left.kind === "meta" ? left.text : left.text) : ""}</code>
                  </td>
                  <td class={`side ${right?.kind ?? "empty"}`}>
                    <Num value={right?.newNo ?? null} />
                    <code>{right?.text ?? ""}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <div class="diff-unified">
            {lines.map((line, index) => (
              <div key={index} class={`diff-line ${line.kind}`}>
                <Num value={line.kind === "added" ? line.newNo : line.oldNo} />
                <code>{line.kind === "hunk" || line.kind === "meta" ? line.text : sign(line) + line.text}</code>
              </div>
            ))}
          </div>
        )}
      </div>
      {rest > 0 && (
        <button type="button" class="link" onClick={() => setAll(true)}>
          Show {rest} more lines
        </button>
      )}
    </figure>
  );
}
