import { memo } from "preact/compat";

import type { Item, NoticeItem, TextItem, Transcript as Model, Turn } from "../transcript";
import { Markdown } from "./Markdown";
import { Marks } from "./Marks";
import { ToolCard } from "./ToolCard";
import { TurnEnd } from "./TurnEnd";

export const PLAN_MARKS: Record<string, string> = { pending: "☐", in_progress: "▶", completed: "☑" };

function TextView({ item }: { item: TextItem }) {
  if (item.reasoning) {
    return (
      <details class="msg reasoning">
        <Marks seqs={item.seqs} />
        <summary>Thinking</summary>
        <div class="text">
          <Markdown text={item.text} />
        </div>
      </details>
    );
  }
  return (
    <div class={`msg agent${item.completed ? "" : " streaming"}`}>
      <Marks seqs={item.seqs} />
      <div class="text">
        <Markdown text={item.text} />
      </div>
    </div>
  );
}

function NoticeView({ item, onOpen }: { item: NoticeItem; onOpen: (id: string) => void }) {
  if (item.tone === "plan") {
    return (
      <div class="notice plan" data-seq={item.seq}>
        <span class="notice-title">Plan</span>
        <ul>
          {(item.entries ?? []).map((entry, index) => (
            <li key={index} data-status={entry.status}>
              {PLAN_MARKS[entry.status] ?? "•"} {entry.text}
            </li>
          ))}
        </ul>
      </div>
    );
  }
  return (
    <div class={`notice ${item.tone}`} data-seq={item.seq} role={item.tone === "wait" || item.tone === "retry" ? "status" : undefined}>
      {item.text}
      {item.link && (
        <>
          {" "}
          <a href={`#session=${item.link}`} onClick={(e) => { e.preventDefault(); onOpen(item.link ?? ""); }}>
            Open {item.link}
          </a>
        </>
      )}
    </div>
  );
}

function ItemView({ item, onOpen }: { item: Item; onOpen: (id: string) => void }) {
  switch (item.kind) {
    case "prompt":
      return (
        <div class="msg user" data-seq={item.seq}>
          <div class="text">{item.text}</div>
        </div>
      );
    case "text":
      return <TextView item={item} />;
    case "tool":
      return <ToolCard tool={item} v={item.v} />;
    case "notice":
      return <NoticeView item={item} onOpen={onOpen} />;
    case "end":
      return <TurnEnd end={item} onOpen={onOpen} />;
    case "hidden":
      return <i class="mark" data-seq={item.seq} data-type={item.type} hidden />;
  }
}

const TurnView = memo(
  function TurnView({ turn, onOpen }: { turn: Turn; v: number; onOpen: (id: string) => void }) {
    return (
      <article class={`turn ${turn.status}`} data-turn-id={turn.id} aria-label={`Turn ${turn.number}`}>
        {turn.items.map((item) => (
          <ItemView key={item.key} item={item} onOpen={onOpen} />
        ))}
      </article>
    );
  },
  (a, b) => a.turn === b.turn && a.v === b.v,
);

/** Every turn of the session, oldest first. */
export function TranscriptView({ transcript, onOpen }: { transcript: Model; onOpen: (id: string) => void }) {
  return (
    <>
      {transcript.head.map((item) => (
        <ItemView key={item.key} item={item} onOpen={onOpen} />
      ))}
      {transcript.turns.map((turn) => (
        <TurnView key={turn.id} turn={turn} v={turn.v} onOpen={onOpen} />
      ))}
    </>
  );
}
