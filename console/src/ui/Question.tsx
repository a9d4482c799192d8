import { useState } from "preact/hooks";

import { describe, gateway } from "../gateway";
import type { QuestionItem } from "../transcript";
import { focusPrompt, useLive } from "./context";

export function answeredText(question: QuestionItem): string {
  const data = question.resolved;
  if (!data) return "";
  if (!data.answers) return `Not answered (${data.reason.replace(/_/g, " ")})`;
  const parts = data.answers.map((answer, index) => {
    const given = [...answer.selected, ...(answer.text ? [answer.text] : [])].join(", ");
    const asked = question.questions[index];
    return asked ? `${asked.prompt} → ${given}` : given;
  });
  return `Answered by ${data.answered_by ?? "the client"}: ${parts.join("; ")}`;
}

/** The agent's questions: one group per question, radio buttons or checkboxes with their labels. */
export function QuestionCard({ question }: { question: QuestionItem }) {
  const live = useLive();
  const [chosen, setChosen] = useState<string[][]>(() => question.questions.map(() => []));
  const [texts, setTexts] = useState<string[]>(() => question.questions.map(() => ""));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const resolved = question.resolved;

  function toggle(index: number, label: string, multi: boolean, on: boolean): void {
    setChosen((current) =>
      current.map((list, i) => {
        if (i !== index) return list;
        if (!multi) return on ? [label] : [];
        return on ? [...list, label] : list.filter((item) => item !== label);
      }),
    );
  }

  async function submit(): Promise<void> {
    setBusy(true);
    setError(null);
    const answers = question.questions.map((_, index) => {
      const text = texts[index]?.trim();
      return text ? { selected: chosen[index] ?? [], text } : { selected: chosen[index] ?? [] };
    });
    try {
      await gateway().answerQuestion(live.id, question.id, { answers });
      focusPrompt();
    } catch (caught) {
      setError(describe(caught));
      setBusy(false);
    }
  }

  const state = resolved ? (resolved.answers ? "allowed" : "denied") : "pending";
  return (
    <section class={`question ${state}`} data-seq={question.seq} data-question-id={question.id} aria-label="Question from the agent">
      <p class="approval-title">
        <strong>The agent asks</strong>
      </p>
      {resolved ? (
        <p class="resolution">
          <span data-seq={question.resolvedSeq ?? undefined}>{answeredText(question)}</span>
        </p>
      ) : (
        <>
          {question.questions.map((q, index) => {
            const name = `question-${question.id}-${index}`;
            return (
              <fieldset key={index} class="question-set">
                <legend>
                  {q.header && <span class="question-header">{q.header}</span>}
                  {q.prompt}
                </legend>
                {q.options.map((option, position) => (
                  <label key={position} class="question-option">
                    <input
                      type={q.multi_select ? "checkbox" : "radio"}
                      name={name}
                      value={option.label}
                      checked={chosen[index]?.includes(option.label) ?? false}
                      onChange={(e) => toggle(index, option.label, q.multi_select, e.currentTarget.checked)}
                    />
                    <span class="option-label">{option.label}</span>
                    {option.description && <span class="option-description">{option.description}</span>}
                  </label>
                ))}
                {q.free_text && (
                  <input
                    class="question-text"
                    type="text"
                    autocomplete="off"
                    placeholder="Your own answer (optional)"
                    aria-label={`Your own answer to: ${q.prompt}`}
                    value={texts[index] ?? ""}
                    onInput={(e) => {
                      const value = e.currentTarget.value;
                      setTexts((current) => current.map((t, i) => (i === index ? value : t)));
                    }}
                  />
                )}
              </fieldset>
            );
          })}
          <div class="approval-actions">
            <button type="button" class="decision allow" disabled={busy} onClick={() => void submit()}>
              Answer
            </button>
          </div>
          {error && (
            <p class="error" role="alert">
              {error}
            </p>
          )}
        </>
      )}
    </section>
  );
}
