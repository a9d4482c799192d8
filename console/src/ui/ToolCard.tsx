import { memo } from "preact/compat";

import { diffTexts, parseUnified, type FileDiff } from "../diff";
import { fileEdits } from "../edits";
import type { ToolItem } from "../transcript";
import { isPlanTool, isQuestionTool } from "../transcript";
import { ApprovalPanel } from "./Approval";
import { DiffView } from "./DiffView";
import { Folded } from "./Fold";
import { QuestionCard } from "./Question";
import { Marks } from "./Marks";

/** What an edit tool's input changes, as diffs. */
export function inputDiffs(input: Record<string, unknown>): FileDiff[] {
  return fileEdits(input).flatMap((edit) =>
    edit.unified !== null ? parseUnified(edit.unified, edit.path) : [diffTexts(edit.path, edit.old, edit.new)],
  );
}

function commandOf(input: Record<string, unknown>): string | null {
  const command = input.command ?? input.cmd;
  if (typeof command === "string") return command;
  if (Array.isArray(command)) return command.map(String).join(" ");
  return null;
}

function searchOf(input: Record<string, unknown>): string | null {
  const pattern = input.pattern ?? input.query ?? input.glob;
  if (typeof pattern !== "string") return null;
  const where = typeof input.path === "string" ? ` in ${input.path}` : "";
  return `${pattern}${where}`;
}

function statusLabel(tool: ToolItem): string {
  if (tool.status) return tool.status;
  if (tool.approvals.some((a) => !a.resolved)) return "waiting for you";
  return "running";
}

function summary(tool: ToolItem): string {
  const description = tool.input.description;
  if (typeof description === "string" && description) return description;
  const path = fileEdits(tool.input)[0]?.path ?? tool.input.file_path ?? tool.input.filePath ?? tool.input.path;
  return typeof path === "string" ? path : "";
}

function Body({ tool, diffs }: { tool: ToolItem; diffs: FileDiff[] }) {
  const command = commandOf(tool.input);
  if (command !== null) return <pre class="tool-command">$ {command}</pre>;
  if (diffs.length > 0) return <>{diffs.map((diff, i) => <DiffView key={i} diff={diff} />)}</>;
  const search = searchOf(tool.input);
  if (search !== null) return <p class="tool-search">Search: <code>{search}</code></p>;
  const keys = Object.keys(tool.input);
  if (keys.length === 0) return null;
  return (
    <details class="tool-input">
      <summary>Input</summary>
      <pre>{JSON.stringify(tool.input, null, 2)}</pre>
    </details>
  );
}

/** A tool call as a card by its kind, with its approval (diff first) and output. */
export const ToolCard = memo(
  function ToolCard({ tool }: { tool: ToolItem; v: number }) {
    if (tool.question) {
      return (
        <div class="tool-question">
          <Marks seqs={tool.seqs} />
          <QuestionCard question={tool.question} />
        </div>
      );
    }
    if (isQuestionTool(tool.name) || isPlanTool(tool.name)) {
      // Shown as the question card or the plan; the tool's JSON is not for people.
      return (
        <div class="tool-quiet" hidden>
          <Marks seqs={tool.seqs} />
        </div>
      );
    }
    const diffs = inputDiffs(tool.input);
    const kind = commandOf(tool.input) !== null ? "command" : diffs.length > 0 ? "edit" : tool.toolKind;
    const status = statusLabel(tool);
    const pending = tool.approvals.some((a) => !a.resolved);
    return (
      <section class={`tool kind-${kind}${pending ? " awaiting" : ""}`} data-tool-id={tool.toolId} aria-label={`Tool ${tool.name}`}>
        <Marks seqs={tool.seqs} />
        <header class="tool-head">
          <span class="tool-name">{tool.name || "tool"}</span>
          <span class="tool-summary">{summary(tool)}</span>
          <span class={`badge ${status.replace(/\s+/g, "-")}`}>{status}</span>
        </header>
        <Body tool={tool} diffs={diffs} />
        {tool.approvals.map((approval) => (
          <ApprovalPanel key={approval.id} approval={approval} />
        ))}
        {tool.output && <Folded className="tool-output" text={tool.output} />}
        {tool.exitCode !== null && tool.exitCode !== 0 && <p class="exit">exit code {tool.exitCode}</p>}
      </section>
    );
  },
  (a, b) => a.tool === b.tool && a.v === b.v,
);
